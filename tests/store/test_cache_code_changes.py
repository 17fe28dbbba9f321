"""The step cache misses when code the tool reaches changed: a method of its object's class, a
class of its module it names, and all of its object's state — never a stale hit.

Each case defines version 1 of a notebook's code, keys it, defines version 2 (the same source
edited, exec'd into a fresh module of the same name, as re-running a cell does; or a method's
``__code__`` replaced) and keys again. Unchanged code exec'd again keys the same, so a rerun
still hits.
"""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys
import textwrap
import types
from pathlib import Path
from typing import Any

import pytest

import planbook
from planbook import Plan, RunResult, Step, Toolbox
from planbook.engine.persistence import UNCACHED_NOTE
from planbook.store.cachekey import code_fingerprint, fingerprint_problem

ROOT = pathlib.Path(__file__).resolve().parents[2]


def cell(source: str, monkeypatch: pytest.MonkeyPatch, name: str = "notebook") -> types.ModuleType:
    """``source`` run in a fresh module called ``name``, as a notebook cell run again makes new objects."""
    module = types.ModuleType(name)
    monkeypatch.setitem(sys.modules, name, module)  # dataclasses and pydantic look their module up
    exec(compile(textwrap.dedent(source), f"<{name}>", "exec"), module.__dict__)
    return module


def fp(fn: Any) -> str | None:
    return code_fingerprint(fn)


def versions(source: str, old: str, new: str, monkeypatch: pytest.MonkeyPatch, tool: Any) -> tuple[Any, Any, Any]:
    """The fingerprints of ``tool(module)`` for version 1, version 1 again, and version 2 (``old`` → ``new``)."""
    assert old in source
    one = fp(tool(cell(source, monkeypatch)))
    again = fp(tool(cell(source, monkeypatch)))
    two = fp(tool(cell(source.replace(old, new), monkeypatch)))
    return one, again, two


# ------------------------------------------------------------------ methods the tool reaches

CALLABLE = """
class Scorer:
    def __init__(self, weight):
        self.weight = weight

    def __call__(self, x: int) -> int:
        return self.helper(x) * self.weight

    def helper(self, x):
        return x + 1
"""


def test_a_callable_objects_edited_helper_method_changes_the_key(monkeypatch: pytest.MonkeyPatch) -> None:
    one, again, two = versions(CALLABLE, "x + 1", "x + 2", monkeypatch, lambda m: m.Scorer(2))
    assert one is not None and one == again
    assert two != one


def test_a_callable_objects_helper_with_replaced_code_changes_the_key(monkeypatch: pytest.MonkeyPatch) -> None:
    module = cell(CALLABLE, monkeypatch)
    scorer = module.Scorer(2)
    before = fp(scorer)
    module.Scorer.helper.__code__ = (lambda self, x: x - 1).__code__
    assert before is not None and fp(scorer) != before


DATACLASS = """
from dataclasses import dataclass, field

@dataclass
class Calc:
    k: int = 1
    tags: list[str] = field(default_factory=list)

    def run(self, x: int) -> int:
        return self.twice(x) + self.k

    def twice(self, x):
        return 2 * x
"""


def test_a_dataclass_bound_methods_edited_sibling_method_changes_the_key(monkeypatch: pytest.MonkeyPatch) -> None:
    one, again, two = versions(DATACLASS, "2 * x", "3 * x", monkeypatch, lambda m: m.Calc().run)
    assert one is not None and one == again
    assert two != one


def test_a_base_class_method_of_the_same_module_is_followed(monkeypatch: pytest.MonkeyPatch) -> None:
    source = """
    class Base:
        def scale(self, x):
            return x * 2

    class Tool(Base):
        def run(self, x: int) -> int:
            return super().scale(x) + 1
    """
    one, again, two = versions(source, "x * 2", "x * 3", monkeypatch, lambda m: m.Tool().run)
    assert one is not None and one == again and two != one


def test_an_edited_dunder_method_reached_without_its_name_changes_the_key(monkeypatch: pytest.MonkeyPatch) -> None:
    """``len(self)`` never names ``__len__``: a class's methods are followed whole, not by the names read."""
    source = """
    class Bag:
        def __init__(self):
            self.items = [1, 2, 3]

        def __len__(self):
            return len(self.items)

        def size(self) -> int:
            return len(self)
    """
    one, again, two = versions(source, "len(self.items)", "len(self.items) * 10", monkeypatch, lambda m: m.Bag().size)
    assert one is not None and one == again and two != one


def test_a_method_under_a_decorator_is_followed(monkeypatch: pytest.MonkeyPatch) -> None:
    """A method wrapped by ``functools.lru_cache`` (written in C), or by another module's decorator
    that does not use ``functools.wraps``: the edited method is still reached."""
    library = cell("def logged(fn):\n    def wrapper(*args):\n        return fn(*args)\n    return wrapper\n",
                   monkeypatch, name="library")
    source = """
    import functools
    from library import logged

    class Tool:
        @functools.lru_cache(maxsize=None)
        def cached(self, x):
            return x + 1

        @logged
        def logged(self, x):
            return x * 2

        def run(self, x: int) -> int:
            return self.cached(x) + self.logged(x)
    """
    assert library.logged(len).__module__ == "library"
    one, again, two = versions(source, "x + 1", "x + 2", monkeypatch, lambda m: m.Tool().run)
    assert one is not None and one == again and two != one
    one, again, two = versions(source, "x * 2", "x * 3", monkeypatch, lambda m: m.Tool().run)
    assert one is not None and one == again and two != one


def test_a_pydantic_models_own_model_post_init_is_followed(monkeypatch: pytest.MonkeyPatch) -> None:
    """pydantic wraps ``model_post_init`` in a function of its own when a model has private attributes."""
    source = PYDANTIC + "\n    def model_post_init(self, context):\n        self._bonus = 1\n"
    one, again, two = versions(source, "self._bonus = 1", "self._bonus = int('1')", monkeypatch,
                               lambda m: m.Pricer().price)  # the same state: only the code tells them apart
    assert one is not None and one == again and two != one


STATIC = """
class Helper:
    @staticmethod
    def compute(x):
        return x + 1

    @classmethod
    def label(cls, x):
        return f"{cls.__name__}:{x}"

def tool(x: int) -> int:
    return Helper.compute(x)
"""


def test_a_same_module_classes_edited_staticmethod_changes_the_key(monkeypatch: pytest.MonkeyPatch) -> None:
    one, again, two = versions(STATIC, "x + 1", "x + 2", monkeypatch, lambda m: m.tool)
    assert one is not None and one == again
    assert two != one


def test_a_staticmethod_with_replaced_code_changes_the_key(monkeypatch: pytest.MonkeyPatch) -> None:
    module = cell(STATIC, monkeypatch)
    before = fp(module.tool)
    vars(module.Helper)["compute"].__func__.__code__ = (lambda x: x - 1).__code__
    assert before is not None and fp(module.tool) != before


def test_an_edited_classmethod_and_class_attribute_change_the_key(monkeypatch: pytest.MonkeyPatch) -> None:
    one, _, two = versions(STATIC, '{cls.__name__}:{x}', '{cls.__name__}={x}', monkeypatch, lambda m: m.Helper.label)
    assert one is not None and two != one
    source = "class Rates:\n    RATE = 2\n\n    def apply(self, x: int) -> int:\n        return x * self.RATE\n"
    one, again, two = versions(source, "RATE = 2", "RATE = 3", monkeypatch, lambda m: m.Rates().apply)
    assert one is not None and one == again and two != one


# ------------------------------------------------------------------ state outside declared fields

PYDANTIC = """
from pydantic import BaseModel, PrivateAttr

class Pricer(BaseModel):
    rate: int = 2
    _bonus: int = PrivateAttr(default=0)

    def price(self, x: int) -> int:
        return x * self.rate + self._bonus
"""


def test_a_pydantic_private_attribute_is_part_of_the_key(monkeypatch: pytest.MonkeyPatch) -> None:
    module = cell(PYDANTIC, monkeypatch)
    pricer = module.Pricer()
    before = fp(pricer.price)
    pricer._bonus = 5
    assert before is not None and fp(pricer.price) != before
    pricer._bonus = 0
    assert fp(pricer.price) == before
    assert fp(cell(PYDANTIC, monkeypatch).Pricer().price) == before  # the cell run again: the same key


def test_a_dataclass_attribute_set_after_init_is_part_of_the_key(monkeypatch: pytest.MonkeyPatch) -> None:
    source = DATACLASS + "\n    def scaled(self, x: int) -> int:\n        return x * getattr(self, 'factor', 1)\n"
    module = cell(source, monkeypatch)
    calc = module.Calc()
    before = fp(calc.scaled)
    calc.factor = 3  # not a declared field
    assert before is not None and fp(calc.scaled) != before


def test_slots_are_part_of_the_key(monkeypatch: pytest.MonkeyPatch) -> None:
    source = """
    from dataclasses import dataclass

    @dataclass(slots=True)
    class Slotted:
        k: int = 1

        def run(self, x: int) -> int:
            return x * self.k

    class Plain:
        __slots__ = ("__k",)

        def run(self, x: int) -> int:
            return x * self.__k
    """
    module = cell(source, monkeypatch)
    assert fp(module.Slotted(1).run) != fp(module.Slotted(2).run) and fp(module.Slotted(1).run) is not None
    a, b = module.Plain(), module.Plain()
    a._Plain__k, b._Plain__k = 1, 2
    assert fp(a.run) != fp(b.run) and fp(a.run) is not None
    assert fp(module.Plain().run) not in (fp(a.run), None)  # a slot never set is part of the key too


def test_an_objects_state_reached_through_its_attributes_is_followed(monkeypatch: pytest.MonkeyPatch) -> None:
    source = """
    class Inner:
        def score(self, x):
            return x + 1

    class Outer:
        def __init__(self):
            self.inner = Inner()

        def __call__(self, x: int) -> int:
            return self.inner.score(x)
    """
    one, again, two = versions(source, "x + 1", "x + 2", monkeypatch, lambda m: m.Outer())
    assert one is not None and one == again and two != one


# ------------------------------------------------------------------ not cached, and why

def test_state_kept_in_c_is_not_cached_and_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    module = cell("import random\n\nclass Dice(random.Random):\n    def roll(self, n: int) -> int:\n"
                  "        return self.randint(1, n)\n", monkeypatch)
    dice = module.Dice(3)
    assert fp(dice.roll) is None
    assert "_random.Random" in (fingerprint_problem(dice.roll) or "")


def test_an_object_holding_itself_is_not_cached(monkeypatch: pytest.MonkeyPatch) -> None:
    module = cell("class Node:\n    def run(self, x: int) -> int:\n        return x\n", monkeypatch)
    node = module.Node()
    node.parent = module.Node()
    node.parent.child = node
    assert fp(node.run) is None and "holds itself" in (fingerprint_problem(node.run) or "")


def test_a_secret_in_the_objects_state_is_not_cached_and_not_keyed(monkeypatch: pytest.MonkeyPatch) -> None:
    source = PYDANTIC.replace("_bonus: int = PrivateAttr(default=0)", "_token: str = PrivateAttr(default='')")
    pricer = cell(source, monkeypatch).Pricer()
    pricer._token = "4821"
    assert fp(pricer.price) is None and "'_token' is a secret" in (fingerprint_problem(pricer.price) or "")
    module = cell("class Client:\n    api_key = 'k-123'\n\n    def get(self, q: str) -> str:\n"
                  "        return q\n", monkeypatch)
    # a class attribute named like a secret is left out of the key, as a module's globals are
    before = fp(module.Client().get)
    module.Client.api_key = "k-456"
    assert before is not None and fp(module.Client().get) == before  # its value is not in the key


def test_a_method_that_cannot_be_fingerprinted_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    """A class of the module is followed whole: a method default with no content form stops caching, and says where."""
    module = cell("class Helper:\n    @staticmethod\n    def f(x, d=object()):\n        return x\n\n"
                  "def tool(x: int) -> int:\n    return Helper.f(x)\n", monkeypatch)
    assert fp(module.tool) is None
    assert "Helper.f → d → builtins.object has no stable content form" in (fingerprint_problem(module.tool) or "")


def test_a_class_attribute_without_a_content_form_does_not_stop_caching(monkeypatch: pytest.MonkeyPatch) -> None:
    """A class-level lock or client is like a module's client: not keyed, not a reason to refuse."""
    module = cell("import threading\n\nclass Tool:\n    lock = threading.Lock()\n\n"
                  "    def run(self, x: int) -> int:\n        return x\n", monkeypatch)
    assert fp(module.Tool().run) is not None


def test_class_fingerprints_are_stable_across_processes_and_hash_seeds() -> None:
    script = textwrap.dedent('''
        import sys, types
        from planbook.store.cachekey import code_fingerprint
        source = """
        from dataclasses import dataclass, field
        from pydantic import BaseModel, PrivateAttr

        class Model(BaseModel):
            a: int = 1
            _p: set = PrivateAttr(default_factory=lambda: {"x", "y", "z"})

        @dataclass(frozen=True)
        class Tag:
            name: str

            def shout(self) -> str:
                return self.name.upper()

        @dataclass
        class Calc:
            tags: frozenset = frozenset({"b", "a", "c"})
            items: list[str] = field(default_factory=list)
            WORDS = {"tea", "coffee"}

            def run(self, x: int) -> bool:
                return x in {1, 2, 3} and Model().a > 0
        """
        module = types.ModuleType("nb")
        sys.modules["nb"] = module
        exec(source, module.__dict__)
        calc = module.Calc()
        calc.extra = {"q", "r"}
        calc.tags_seen = {module.Tag(w) for w in "abcdefgh"}  # the hash seed orders them: each is written whole
        print(code_fingerprint(calc.run))
    ''')
    prints = set()
    for seed in ("0", "1", "12345"):
        env = {**os.environ, "PYTHONHASHSEED": seed, "PYTHONPATH": str(ROOT)}
        out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120)
        assert out.returncode == 0, out.stderr
        prints.add(out.stdout.strip())
    assert len(prints) == 1 and prints.pop().startswith("code:")


# ------------------------------------------------------------------ through a run

def cached(result: RunResult) -> set[str]:
    return {e.step or "" for e in result.events if e.kind == "step.cached"}


def run(tool: Any, store: Path, **args: Any) -> RunResult:
    box = Toolbox()
    box.add(tool, name="calc")
    plan = Plan(id="p", steps=[Step(id="s", tool="calc", args=args)])
    return planbook.run(plan, tools=box, store=store, cache=True)


@pytest.mark.parametrize("source, old, new, tool", [
    (CALLABLE, "x + 1", "x + 2", lambda m: m.Scorer(2)),
    (DATACLASS, "2 * x", "3 * x", lambda m: m.Calc().run),
    (STATIC, "x + 1", "x + 2", lambda m: m.tool),
])
def test_a_run_after_the_edit_misses_and_a_rerun_of_unchanged_code_hits(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, source: str, old: str, new: str, tool: Any) -> None:
    store = tmp_path / "runs.sqlite"
    first = run(tool(cell(source, monkeypatch)), store, x=5)
    rerun = run(tool(cell(source, monkeypatch)), store, x=5)  # the cell run again, nothing edited
    edited = run(tool(cell(source.replace(old, new), monkeypatch)), store, x=5)
    assert first.status == rerun.status == edited.status == "completed"
    assert cached(rerun) == {"s"} and rerun.outputs == first.outputs
    assert cached(edited) == set() and edited.outputs != first.outputs


def test_a_run_after_a_private_attribute_changed_misses(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = tmp_path / "runs.sqlite"
    pricer = cell(PYDANTIC, monkeypatch).Pricer()
    assert run(pricer.price, store, x=5).outputs == {"s": 10}
    pricer._bonus = 1
    later = run(pricer.price, store, x=5)
    assert later.outputs == {"s": 11} and cached(later) == set()


def test_a_run_of_a_tool_with_state_in_c_says_why_it_is_not_cached(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    module = cell("import random\n\nclass Dice(random.Random):\n    def roll(self, n: int) -> int:\n"
                  "        return 1\n", monkeypatch)
    store = tmp_path / "runs.sqlite"
    run(module.Dice(3).roll, store, n=6)
    again = run(module.Dice(3).roll, store, n=6)
    notes = again.plan.step("s").notes
    assert cached(again) == set() and notes.startswith(UNCACHED_NOTE)
    assert "keeps state in _random.Random" in notes and "version=" in notes


def test_a_global_instance_of_a_same_module_class_has_its_class_followed(monkeypatch: pytest.MonkeyPatch) -> None:
    """``model = Model()`` in a cell and a tool using it: both cells run again with ``predict``
    edited must miss. Its state is a global's data, like a module's constant: not keyed."""
    source = """
    class Model:
        def __init__(self):
            self.offset = 1

        def predict(self, x):
            return x + self.offset

    model = Model()

    def tool(x: int) -> int:
        return model.predict(x)
    """
    one, again, two = versions(source, "x + self.offset", "x - self.offset", monkeypatch, lambda m: m.tool)
    assert one is not None and one == again and two != one
    module = cell(source, monkeypatch)
    module.model.conn = __import__("threading").Lock()  # a global's state: not keyed, not a reason to refuse
    assert fp(module.tool) == one


def test_a_slot_that_cannot_be_read_is_not_left_out_of_the_key(monkeypatch: pytest.MonkeyPatch) -> None:
    module = cell("class Slotted:\n    __slots__ = ('k',)\n\n    def run(self, x: int) -> int:\n        return x\n",
                  monkeypatch)
    tool = module.Slotted()
    tool.k = 1
    delattr(module.Slotted, "k")  # the slot's descriptor is gone: its value can no longer be read
    assert fp(tool.run) is None and "slot 'k' that cannot be read" in (fingerprint_problem(tool.run) or "")
