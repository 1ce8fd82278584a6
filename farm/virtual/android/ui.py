"""The foreground window: nodes with bounds that ``input`` acts on, ``uiautomator dump`` writes.

The dump format is fixture ``uiautomator_window_dump__landscape_game.xml``: one
line without a final newline, ``<?xml version='1.0' encoding='UTF-8'
standalone='yes' ?>``, a ``<hierarchy rotation="0">`` root, attributes in the
fixed order (index, text, resource-id, class, package, content-desc, checkable,
checked, clickable, enabled, focusable, focused, scrollable, long-clickable,
password, selected, bounds), empty elements closed with `` />``.

MainActivity's widgets and their resource ids come from apache/tvm
``apps/android_rpc/app/src/main/res/layout/content_main.xml`` (``input_address``,
``input_port``, ``input_key``, ``switch_persistent``) and the labels from
``res/values/strings.xml``. An empty EditText reports its hint as text, as
``TextView.getTextForAccessibility`` does.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING
from xml.sax.saxutils import quoteattr

if TYPE_CHECKING:
    from farm.virtual.android.phone import AndroidPhone

PKG = "org.apache.tvm.tvmrpc"
_HINTS = {
    "input_address": "Enter the proxy server address",
    "input_port": "Enter the proxy server port",
    "input_key": "Enter the app connection key",
}
_TEXT = "android.widget.TextView"
_LINEAR = "android.widget.LinearLayout"
_FRAME = "android.widget.FrameLayout"
_LAUNCHER = "com.android.launcher3"
_LABELS = {"input_address": "Address", "input_port": "Port", "input_key": "Key"}


@dataclass
class Node:
    """One accessibility node."""

    cls: str
    package: str
    bounds: tuple[int, int, int, int]
    text: str = ""
    resource_id: str = ""
    checkable: bool = False
    checked: bool = False
    clickable: bool = False
    focusable: bool = False
    focused: bool = False
    children: list[Node] = field(default_factory=list)

    def contains(self, x: int, y: int) -> bool:
        """Whether the point lies inside the bounds (left/top inclusive)."""
        left, top, right, bottom = self.bounds
        return left <= x < right and top <= y < bottom


def _xml(node: Node, index: int) -> str:
    left, top, right, bottom = node.bounds
    flags = (
        f'checkable="{str(node.checkable).lower()}" checked="{str(node.checked).lower()}" '
        f'clickable="{str(node.clickable).lower()}" enabled="true" '
        f'focusable="{str(node.focusable).lower()}" focused="{str(node.focused).lower()}" '
        'scrollable="false" long-clickable="false" password="false" selected="false"'
    )
    head = (
        f"<node index=\"{index}\" text={quoteattr(node.text)} "
        f"resource-id={quoteattr(node.resource_id)} "
        f"class=\"{node.cls}\" package=\"{node.package}\" content-desc=\"\" {flags} "
        f'bounds="[{left},{top}][{right},{bottom}]"'
    )
    if not node.children:
        return head + " />"
    inner = "".join(_xml(child, i) for i, child in enumerate(node.children))
    return head + ">" + inner + "</node>"


def render_dump(root: Node, rotation: int = 0) -> str:
    """The window dump XML, exactly one line with no trailing newline."""
    return (
        "<?xml version='1.0' encoding='UTF-8' standalone='yes' ?>"
        f'<hierarchy rotation="{rotation}">{_xml(root, 0)}</hierarchy>'
    )


class Screen:
    """What is in the foreground (``home``, ``main``, ``rpc``) and which field has focus."""

    def __init__(self, phone: AndroidPhone) -> None:
        self.phone = phone
        self.foreground = "home"
        self.focused_id: str | None = None

    def root(self) -> Node | None:
        """The foreground window's node tree, or None when the screen is off."""
        if not self.phone.awake:
            return None
        w, h = self.phone.spec.screen_w_px, self.phone.spec.screen_h_px
        top = h * 3 // 80
        if self.foreground == "main":
            return self._main(w, h, top)
        if self.foreground == "rpc":
            bounds = (w // 20, top + 250, w * 19 // 20, top + 376)
            button = Node("android.widget.Button", PKG, bounds,
                          text="Stop RPC", resource_id=f"{PKG}:id/button_stop_rpc",
                          clickable=True, focusable=True)
            return Node(_FRAME, PKG, (0, 0, w, h), children=[button])
        icon = Node(_TEXT, _LAUNCHER, (w // 10, h // 2, w * 3 // 10, h // 2 + 220),
                    text="TVM RPC", clickable=True, focusable=True)
        return Node(_FRAME, _LAUNCHER, (0, 0, w, h), children=[icon])

    def _main(self, w: int, h: int, top: int) -> Node:
        fields = self.phone.app.fields
        row_h = h // 20
        y = top + row_h * 2
        title = Node(_TEXT, PKG, (row_h, top + row_h // 3, w // 2, y - row_h // 3), text="TVM RPC")
        toolbar = Node("android.view.ViewGroup", PKG, (0, top, w, y),
                       resource_id=f"{PKG}:id/toolbar", children=[title])
        rows = []
        values = {
            "input_address": fields.address, "input_port": fields.port, "input_key": fields.key,
        }
        for rid, value in values.items():
            label = Node(_TEXT, PKG, (0, y, w // 5, y + row_h), text=_LABELS[rid])
            edit = Node("android.widget.EditText", PKG, (w // 5, y, w * 4 // 5, y + row_h),
                        text=value or _HINTS[rid], resource_id=f"{PKG}:id/{rid}",
                        clickable=True, focusable=True, focused=self.focused_id == rid)
            rows.append(Node(_LINEAR, PKG, (0, y, w, y + row_h), children=[label, edit]))
            y += row_h
        switch = Node("android.widget.Switch", PKG, (w * 2 // 5, y, w * 3 // 5, y + row_h),
                      text="Connected" if fields.switch else "Disconnected",
                      resource_id=f"{PKG}:id/switch_persistent", checkable=True,
                      checked=fields.switch, clickable=True, focusable=True)
        label = Node(_TEXT, PKG, (0, y, w * 2 // 5, y + row_h), text="Persistent RPC")
        rows.append(Node(_LINEAR, PKG, (0, y, w, y + row_h), children=[label, switch]))
        content = Node(_LINEAR, PKG, (0, top + row_h * 2, w, y + row_h), children=rows)
        coordinator = Node("android.view.ViewGroup", PKG, (0, top, w, h), children=[
            Node(_LINEAR, PKG, (0, top, w, top + row_h * 2), children=[toolbar]), content])
        frame = Node(_FRAME, PKG, (0, top, w, h), resource_id="android:id/content",
                     children=[coordinator])
        return Node(_FRAME, PKG, (0, 0, w, h), children=[
            Node(_LINEAR, PKG, (0, 0, w, h), children=[frame])])

    def hit(self, x: int, y: int) -> Node | None:
        """The deepest clickable node under the point."""
        root = self.root()
        found = None
        stack = [root] if root else []
        while stack:
            node = stack.pop()
            if node.contains(x, y):
                if node.clickable:
                    found = node
                stack.extend(node.children)
        return found
