"""HTML from results, sanitised by a maintained sanitizer and kept inside its pane.

A step's result may bring its own HTML (``_repr_html_``, a DataFrame's table). Shown in a
pane of the live view or of the saved record, that HTML sits inside planbook's own page, so
it must not run script, load anything from another host (or from the notebook's server),
restyle or cover the page, or close the pane's elements and write outside it. Matching
such markup with regular expressions misses what browsers accept (``<img src=x/onerror=…>``,
``&#47;&#47;host``, ``/\\host``, CSS escapes), so the one sanitiser here is nh3, the Python
binding of Ammonia, which parses the markup the way browsers do (html5ever) and writes
back only what an allow-list keeps:

- tags for text, lists and tables, and images; no forms, frames, scripts, style sheets,
  SVG or MathML (whose foreign-content parsing is where sanitizers' mutation bugs live);
- attributes that lay out a table or describe an image; no event handler, ``class``,
  ``id`` or ``data-*`` (the page's own CSS and JavaScript act on those);
- no URL at all but an image's ``data:`` source of a raster or SVG picture type: no
  http(s), no protocol-relative or relative URL, so nothing loads from anywhere (an
  image element draws an SVG as a picture, with no script and no external resource);
- inline CSS properties of colour, type, spacing, borders and size; no ``position``, no
  ``transform``, no property that can hold ``url()``; and of those, only plain values
  (:func:`kept_style`): no negative length (a negative margin pulls the result over what
  stands above its pane: a forged "Run completed" over the real "Run failed"), no length
  bigger than a pane (:data:`MAX_LENGTHS`) or measured on the page (``vh``, ``vw``), no
  function but a colour's, no quote, escape, comment or ``!important``. The views also clip
  the pane a result sits in (``overflow``, ``contain``, a max height).

The output is well-formed: every element it opens it closes, so a pane cannot swallow or
close what follows it. It is also a fixed point (cleaning it again changes nothing): a
markup the browser would parse into another tree than the one the sanitiser checked is
not shown as HTML.

**What is shown as text.** Removing something can change what a result means, so the
sanitiser keeps a result's HTML only when it lost nothing but presentation: a
``<style>`` sheet, ``class``/``id`` attributes, inline CSS properties outside the allow-list
(a DataFrame's table keeps its rows, without pandas' CSS). When it had to remove an
element, an attribute, a URL or content (a script, an event handler, a link, a picture
from elsewhere, a form, an SVG drawing) the result is shown as its text, and the pane says
so: a table missing the picture or the link it described would mislead more than its text.
Unknown (custom) elements are dropped with their tags only (their text stays): without
their definitions they have no meaning of their own.

nh3 is imported when the first result's HTML is sanitised, not with planbook.
"""

from __future__ import annotations

import re
from typing import Any, NamedTuple

#: what a pane says when a result's HTML is shown as its text
AS_TEXT_NOTE = ("its HTML is shown as text: keeping it safe would remove scripts, event handlers, "
                "links or resources from elsewhere (planbook shows no HTML that does any of these)")
#: what a pane says when a result's HTML holds one of the run's secrets
SECRET_NOTE = "its HTML holds a secret of the run: shown as text, with the secret hidden"
#: what a pane says when a result's HTML is shown without its style sheet and classes
STYLES_LEFT_OUT_NOTE = "shown without its own styles (style sheets, classes and layout CSS are left out)"

#: the elements a result's HTML may keep
TAGS = frozenset({
    "abbr", "b", "bdi", "bdo", "blockquote", "br", "caption", "cite", "code", "col", "colgroup", "dd", "del",
    "dfn", "div", "dl", "dt", "em", "figcaption", "figure", "h1", "h2", "h3", "h4", "h5", "h6", "hr", "i",
    "img", "ins", "kbd", "li", "mark", "ol", "p", "pre", "q", "rp", "rt", "ruby", "s", "samp", "small", "span",
    "strong", "sub", "sup", "table", "tbody", "td", "tfoot", "th", "thead", "time", "tr", "u", "ul", "var", "wbr",
})
_CELL = {"colspan", "rowspan", "headers", "scope", "abbr", "width", "height", "nowrap", "align", "valign",
         "halign"}  # ``halign``: pandas writes it on a MultiIndex's header cells
#: the attributes kept, by tag (``*``: on every tag); ``style`` is filtered by :data:`CSS_PROPERTIES`
ATTRIBUTES: dict[str, frozenset[str]] = {
    "*": frozenset({"title", "lang", "dir", "style"}),
    "table": frozenset({"border", "cellpadding", "cellspacing", "width", "frame", "rules", "summary", "align"}),
    "td": frozenset(_CELL), "th": frozenset(_CELL),
    "tr": frozenset({"align", "valign"}), "thead": frozenset({"align", "valign"}),
    "tbody": frozenset({"align", "valign"}), "tfoot": frozenset({"align", "valign"}),
    "col": frozenset({"span", "width", "align", "valign"}), "colgroup": frozenset({"span", "width", "align", "valign"}),
    "img": frozenset({"src", "alt", "width", "height"}),
    "ol": frozenset({"start", "reversed", "type"}), "li": frozenset({"value"}),
    "time": frozenset({"datetime"}), "del": frozenset({"datetime"}), "ins": frozenset({"datetime"}),
    "p": frozenset({"align"}), "div": frozenset({"align"}),
    "h1": frozenset({"align"}), "h2": frozenset({"align"}), "h3": frozenset({"align"}),
}
#: inline CSS properties kept: none can hold ``url()``, move an element out of its box or over the page
CSS_PROPERTIES = frozenset({
    "color", "background-color", "opacity", "visibility", "display",
    "font", "font-family", "font-size", "font-style", "font-variant", "font-weight", "line-height",
    "letter-spacing", "word-spacing", "text-align", "text-decoration", "text-decoration-color",
    "text-decoration-line", "text-decoration-style", "text-indent", "text-transform", "text-overflow",
    "vertical-align", "white-space", "word-break", "word-wrap", "overflow-wrap", "hyphens", "direction",
    "margin", "margin-top", "margin-right", "margin-bottom", "margin-left",
    "padding", "padding-top", "padding-right", "padding-bottom", "padding-left",
    "border", "border-top", "border-right", "border-bottom", "border-left", "border-color", "border-style",
    "border-width", "border-radius", "border-collapse", "border-spacing",
    "border-top-color", "border-right-color", "border-bottom-color", "border-left-color",
    "border-top-style", "border-right-style", "border-bottom-style", "border-left-style",
    "border-top-width", "border-right-width", "border-bottom-width", "border-left-width",
    "width", "height", "min-width", "max-width", "min-height", "max-height", "overflow", "overflow-x",
    "overflow-y", "table-layout", "caption-side", "empty-cells", "list-style-type", "list-style-position",
})
#: the largest length a kept CSS value may give, by unit: about a pane (a page-sized box, or a
#: font that fills the page, is dropped); a unit not listed (``vh``, ``vw``, ``vmin``, ``cqh``...:
#: measured on the page or a container) is dropped whatever its size
MAX_LENGTHS = {"": 1200.0, "px": 1200.0, "%": 100.0, "em": 75.0, "rem": 75.0, "ex": 150.0, "ch": 150.0,
               "lh": 60.0, "pt": 900.0, "pc": 75.0, "in": 12.5, "cm": 32.0, "mm": 320.0, "q": 1280.0,
               "deg": 360.0, "s": 10.0, "ms": 10000.0}
#: what a kept CSS value may be written with (lower-cased): letters, digits, ``#``, ``%``, ``.``,
#: ``,``, spaces, ``-``, ``+`` and the brackets of a colour function; nothing that quotes, escapes,
#: comments or ends a declaration
_CSS_VALUE = re.compile(r"[a-z0-9#%., ()+\-]*")
#: the only functions a kept value may call: colours
_COLOUR_FUNCTION = re.compile(r"(?:rgba?|hsla?)\(")
#: a number and its unit (``-12.5px``, ``1e3px``, ``.5em``, ``40%``)
_LENGTH = re.compile(r"([+-]?)((?:\d+(?:\.\d+)?|\.\d+)(?:e[+-]?\d+)?)([a-z%]*)")
#: a minus sign that is not a hyphen inside a keyword (``pre-wrap``): a negative number, however spaced
_MINUS = re.compile(r"(?<![a-z])-")
#: a hexadecimal colour (its digits are no length)
_HEX_COLOUR = re.compile(r"#[0-9a-f]+")


def _fits(value: str) -> bool:
    """True when a CSS value (lower-cased, of safe characters) gives no negative, page-sized or
    page-relative length and calls no function but a colour's."""
    if "(" in _COLOUR_FUNCTION.sub("", value) or _MINUS.search(value):
        return False
    for sign, number, unit in _LENGTH.findall(_HEX_COLOUR.sub("", value)):
        limit = MAX_LENGTHS.get(unit)
        if sign == "-" or limit is None:
            return False
        try:
            size = float(number)
        except ValueError:
            return False
        if size > limit:
            return False
    return True


def kept_style(style: str) -> str | None:
    """The declarations of an inline ``style`` that a result may keep (see the module docstring),
    written as ``name:value;…`` (what nh3 writes, so cleaning again changes nothing); None when
    none is kept. Each declaration is checked alone and written back from its parts, so a
    declaration hidden in a quote or a comment cannot come back to life."""
    kept = []
    for declaration in style.split(";"):
        name, colon, value = declaration.partition(":")
        name, value = name.strip().lower(), value.strip()
        low = value.lower()
        if (not colon or name not in CSS_PROPERTIES or not value or not _CSS_VALUE.fullmatch(low)
                or not _fits(low)):
            continue
        kept.append(f"{name}:{value}")
    return ";".join(kept) or None


#: the picture types an ``<img>``'s ``data:`` source may have (an image element draws SVG inert)
IMAGE_TYPES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp", "image/svg+xml"})

# Every element name of HTML (current and obsolete), SVG and MathML: the probe that tells what the
# sanitiser removed keeps them all, so removing any of them is seen (see sanitize_html).
_ALL_TAGS = TAGS | frozenset({
    "a", "address", "area", "article", "aside", "audio", "base", "basefont", "bgsound", "big", "blink", "body",
    "button", "canvas", "center", "data", "datalist", "details", "dialog", "dir", "embed", "fieldset", "font",
    "footer", "form", "frame", "frameset", "head", "header", "hgroup", "html", "iframe", "image", "input",
    "isindex", "keygen", "label", "legend", "link", "listing", "main", "map", "marquee", "menu", "menuitem",
    "meta", "meter", "multicol", "nav", "nextid", "nobr", "noembed", "noframes", "noscript", "object",
    "optgroup", "option", "output", "param", "picture", "plaintext", "portal", "progress", "rb", "rtc",
    "script", "search", "section", "select", "slot", "source", "spacer", "strike", "style", "summary",
    "template", "textarea", "title", "track", "tt", "video", "xmp",
    # SVG (html5ever keeps the camelCase of the names it knows)
    "svg", "g", "defs", "symbol", "use", "switch", "foreignObject", "desc", "metadata", "rect", "circle",
    "ellipse", "line", "polyline", "polygon", "path", "text", "tspan", "textPath", "marker", "pattern",
    "clipPath", "mask", "filter", "linearGradient", "radialGradient", "stop", "animate", "animateMotion",
    "animateTransform", "set", "mpath", "view", "feImage",
    # MathML
    "math", "mi", "mn", "mo", "ms", "mtext", "mrow", "msup", "msub", "msubsup", "mfrac", "msqrt", "mroot",
    "mtable", "mtr", "mtd", "mstyle", "semantics", "annotation", "annotation-xml", "mglyph", "malignmark",
})
_ALL_SCHEMES = frozenset({
    "http", "https", "ftp", "ftps", "sftp", "file", "data", "blob", "javascript", "vbscript", "mailto", "tel",
    "sms", "ws", "wss", "about", "chrome", "view-source", "jar", "ms-its", "mhtml", "irc", "ircs", "git", "ssh",
    "news", "nntp", "urn", "magnet", "xmpp", "webcal", "feed", "intent", "filesystem", "resource",
})
#: attributes the sanitiser drops as presentation (the page's CSS and scripts key on them)
_PRESENTATION = frozenset({"class", "id"})


class SanitisedHTML(NamedTuple):
    """A result's HTML as the sanitiser keeps it: safe to put in a pane."""

    html: str
    #: what was left out ('' when nothing was), to say in the pane: only ever presentation
    left_out: str = ""


def _image_source(tag: str, attribute: str, value: str) -> str | None:
    """Keep an ``<img>``'s ``data:`` source of a picture type; drop every other URL (the
    sanitiser has parsed it and let only ``data:`` through); keep only the plain declarations of a
    ``style`` (:func:`kept_style`)."""
    if attribute == "style":
        return kept_style(value)
    if tag == "img" and attribute == "src":
        media = value[5:].split(",", 1)[0].split(";", 1)[0].strip().lower() if value[:5].lower() == "data:" else ""
        return value if media in IMAGE_TYPES else None
    return value


def _without_presentation(tag: str, attribute: str, value: str) -> str | None:
    if attribute == "style":  # a declaration left out is presentation too (a negative margin)
        return kept_style(value)
    return None if attribute in _PRESENTATION else value


_cleaners: tuple[Any, Any, Any] | None = None


def _build() -> tuple[Any, Any, Any]:
    """The strict cleaner and the two probes (built once: nh3 is imported here, not with planbook)."""
    global _cleaners
    if _cleaners is None:
        import nh3

        strict = nh3.Cleaner(
            tags=set(TAGS), clean_content_tags={"script", "style"},
            attributes={tag: set(names) for tag, names in ATTRIBUTES.items()},
            attribute_filter=_image_source, strip_comments=True, link_rel=None,
            url_schemes={"data"}, url_relative="deny", filter_style_properties=set(CSS_PROPERTIES))
        # the probes parse the same way and keep everything (every element, attribute, URL, comment
        # dropped alike): what differs from the strict output is what the strict cleaner removed
        everything = nh3.Cleaner(
            tags=set(_ALL_TAGS), clean_content_tags=set(), generic_attribute_prefixes={""},
            strip_comments=True, link_rel=None, url_schemes=set(_ALL_SCHEMES))
        but_presentation = nh3.Cleaner(
            tags=set(_ALL_TAGS - {"style"}), clean_content_tags={"style"}, generic_attribute_prefixes={""},
            attribute_filter=_without_presentation, strip_comments=True, link_rel=None,
            url_schemes=set(_ALL_SCHEMES), filter_style_properties=set(CSS_PROPERTIES))
        _cleaners = (strict, everything, but_presentation)
    return _cleaners


def sanitize_html(markup: str) -> SanitisedHTML | None:
    """``markup`` as the sanitiser keeps it (see the module docstring), or None when it cannot be
    shown as HTML without losing more than its presentation: the caller then shows the result
    as text and says so (:data:`AS_TEXT_NOTE`)."""
    strict, everything, but_presentation = _build()
    try:
        kept = strict.clean(markup)
        if strict.clean(kept) != kept:  # the browser would parse another tree than the one checked
            return None
        if kept == everything.clean(markup):
            return SanitisedHTML(kept)
        if kept == but_presentation.clean(markup):
            return SanitisedHTML(kept, STYLES_LEFT_OUT_NOTE)
    except Exception:  # a markup the sanitiser refuses (lone surrogates): shown as text, which says so
        return None
    return None


def readable_text(markup: str) -> str:
    """Every text a person could read of ``markup``: its text content (tags taken away, so
    ``hunter2-<b>x</b>`` reads ``hunter2-x``), its attributes' values, and the text of the SVG
    pictures it holds as ``data:`` sources (decoded). What the gate checks for secrets before a
    result's HTML or picture is shown. The markup is first written out by the sanitiser's own
    parser (what a browser would build), then read with the standard library's HTML parser."""
    import urllib.request
    from html.parser import HTMLParser

    _, everything, _ = _build()
    parts: list[str] = []
    sources: list[str] = []

    class Reader(HTMLParser):
        def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
            for _, value in attrs:
                if value:
                    parts.append(value)
                    sources.append(value)

        def handle_data(self, data: str) -> None:
            parts.append(data)

    try:
        reader = Reader(convert_charrefs=True)
        reader.feed(everything.clean(markup))
        reader.close()
    except Exception:  # a markup the parser refuses (lone surrogates): its raw text is what is read
        return markup
    text = "".join(parts)
    for value in sources:
        if value[:5].lower() == "data:" and "svg" in value[:40].lower():
            try:
                with urllib.request.urlopen(value) as picture:  # the standard library's data: URL reader
                    text += "\n" + readable_text(picture.read().decode("utf-8", "replace"))
            except (ValueError, OSError):
                continue
    return text
