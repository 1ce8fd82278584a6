"""A conv's output handed to the depthwise conv after it in channel blocks, not through NCHW.

farm legalizes every conv in channel blocks (NCHWc, :mod:`farm.jobs.
cpu_schedules.legalize`) but keeps NCHW between kernels: a conv's register
tile is written back transposed (a vector of channels to a plane each), and
the depthwise conv after it copies its input back into channel blocks, one
scalar load a plane apart per lane (``conv2d_pack_data``). onnxruntime keeps
NCHWc between its convs and reorders only where another operator needs NCHW
(its ``ReorderInput``/``ReorderOutput`` nodes). Here, after fusion, a
fused conv whose only reader is a depthwise conv with the same channel block
writes ``[N, C/b, H, W, b]`` instead (its tile stored as whole vectors) and
the depthwise conv reads that layout (its padded copy a vector per load):
both functions' buffers go through ``transform_layout``, and the Relax call
between them carries the blocked tensor. MobileNetV3-small untuned, 1
thread, AVX-512, one process alternating: 2.16 -> 1.93 ms (docs/benchmarks.md).

Functions a tuning database already scheduled are left as they are (their
records are of the NCHW forms that ``tunable_module`` extracts).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from farm.jobs.cpu_schedules.legalize import BLOCKED_CONV, DEPTHWISE_PACK

__all__ = ["blocked_handoffs"]


@dataclass(frozen=True)
class _Handoff:
    """One conv -> depthwise conv pair: the two bindings and the channel block."""

    producer: Any  # the conv's binding var (its call's output, read once)
    consumer: Any  # the depthwise conv's binding var
    calls: tuple[Any, Any]  # their ``call_tir``s
    block: int  # channels per block of both


def blocked_handoffs(mod: Any) -> Any:
    """``mod`` with each conv -> depthwise conv pair handed over in channel blocks.

    Args:
        mod: a fused Relax module (after ``FuseTIR``; after
            ``MetaScheduleApplyDatabase`` where there is a database).

    Returns:
        The module; unchanged where no pair qualifies (:func:`_pairs`).
    """
    from tvm import relax

    if "main" not in [gv.name_hint for gv in mod.functions]:
        return mod
    pairs = _pairs(mod)
    if not pairs:
        return mod
    rewriter = _rewriter()(mod, pairs)
    gv = mod.get_global_var("main")
    rewriter.builder_.update_func(gv, rewriter.visit_expr(mod["main"]))
    return relax.transform.DeadCodeElimination()(rewriter.builder_.get())


def _pairs(mod: Any) -> list[_Handoff]:
    """The conv -> depthwise conv pairs of ``mod``'s ``main``.

    A ``call_tir`` of a depthwise conv whose input is the output of a conv's
    ``call_tir`` that nothing else reads, both functions unscheduled, the
    conv's blocks of output channels (none padded) the depthwise conv's
    input blocks.
    """
    calls, uses = _bindings(mod["main"])
    found = []
    for var, call in calls.items():
        fields = call.args[1].fields
        data = fields[0] if len(fields) else None
        if data is None or data not in calls or uses.get(data, 0) != 1:
            continue
        block = _pack_block(mod[call.args[0]])
        conv = _conv_blocks(mod[calls[data].args[0]])
        channels = [int(d) for d in data.ty.shape.values]
        if block is not None and conv is not None and conv[-1] == block \
                and conv[1] * conv[-1] == channels[1]:
            found.append(_Handoff(data, var, (calls[data], call), block))
    return found


def _bindings(func: Any) -> tuple[dict[Any, Any], dict[Any, int]]:
    """(binding var -> its ``call_tir``, var -> times it is read) of a Relax function."""
    import tvm
    from tvm import relax

    call_tir = tvm.ir.Op.get("relax.call_tir")
    calls: dict[Any, Any] = {}
    uses: dict[Any, int] = {}

    @relax.expr_functor.visitor
    class Visitor(relax.PyExprVisitor):
        def visit_var_binding_(self, binding: Any) -> None:
            value = binding.value
            if isinstance(value, relax.Call) and value.op.same_as(call_tir):
                calls[binding.var] = value
            self.visit_expr(value)

        def visit_var_(self, var: Any) -> None:
            uses[var] = uses.get(var, 0) + 1

        def visit_dataflow_var_(self, var: Any) -> None:
            uses[var] = uses.get(var, 0) + 1

    Visitor().visit_expr(func)
    return calls, uses


def _named_block(func: Any, name: str) -> tuple[Any, Any] | None:
    """(schedule, block) of the unscheduled PrimFunc's block ``name``, or None."""
    from tvm import s_tir, tirx

    if not isinstance(func, tirx.PrimFunc) or (func.attrs and "tirx.is_scheduled" in func.attrs):
        return None
    sch = s_tir.Schedule(func)
    for block in sch.get_child_blocks(sch.get_sblock("root")):
        if sch.get(block).name_hint == name:
            return sch, block
    return None


def _pack_block(func: Any) -> int | None:
    """Channels per block of a depthwise conv's input copy (legalize's ``_pack_data``), or None."""
    found = _named_block(func, DEPTHWISE_PACK)
    if found is None:
        return None
    sch, block = found
    if len(sch.get(block).reads) != 1:
        return None
    return int(sch.get(block).writes[0].source.shape[-1])


def _conv_blocks(func: Any) -> list[int] | None:
    """The shape of a conv's blocked result (``[N, O/b, OH, OW, b]``), or None."""
    found = _named_block(func, BLOCKED_CONV)
    if found is None:
        return None
    sch, block = found
    return [int(d) for d in sch.get(block).writes[0].source.shape]


def _to_blocks(block: int) -> Any:
    """The index map NCHW -> ``[N, C/block, H, W, block]``."""
    return lambda n, c, y, x: (n, c // block, y, x, c % block)


def _blocked_output(func: Any, block: int) -> Any | None:
    """The conv's PrimFunc writing its output in channel blocks, or None where TVM refuses."""
    from tvm import s_tir

    sch = s_tir.Schedule(func)
    last = sch.get_child_blocks(sch.get_sblock("root"))[-1]
    try:
        sch.transform_layout(last, ("write", 0), _to_blocks(block))
    except (s_tir.schedule.ScheduleError, RuntimeError):
        return None
    return sch.mod["main"]


def _blocked_input(func: Any, block: int) -> Any | None:
    """The depthwise conv's PrimFunc reading its input in channel blocks, or None."""
    from tvm import s_tir

    sch = s_tir.Schedule(func)
    try:
        sch.transform_layout(sch.get_sblock(DEPTHWISE_PACK), ("read", 0), _to_blocks(block))
    except (s_tir.schedule.ScheduleError, RuntimeError):
        return None
    return sch.mod["main"]


def _rewriter() -> Any:
    """The Relax mutator class that rewrites the pairs' calls (TVM imported on use)."""
    from tvm import relax

    @relax.expr_functor.mutator
    class Rewriter(relax.PyExprMutator):
        """Each pair's two calls to new functions: the conv's result typed in blocks."""

        def __init__(self, mod: Any, pairs: list[_Handoff]) -> None:
            super().__init__(mod)
            self.mod = mod
            self.made: dict[tuple[str, int, str], Any] = {}
            self.plan: dict[Any, tuple[Any, Any]] = {}  # binding var -> (GlobalVar, type)
            for pair in pairs:  # both sides or neither
                out = self._function(mod, pair.calls[0], pair.block, "out")
                into = self._function(mod, pair.calls[1], pair.block, "in")
                if out is not None and into is not None:
                    self.plan[pair.producer] = out
                    self.plan[pair.consumer] = into

        def visit_var_binding_(self, binding: Any) -> None:
            if binding.var not in self.plan:
                super().visit_var_binding_(binding)
                return
            gv, ty = self.plan[binding.var]
            new = relax.call_tir(gv, self.visit_expr(binding.value.args[1]), ty)
            self.set_var_remap(binding.var, self.builder_.emit(new))

        def _function(self, mod: Any, call: Any, block: int, side: str) -> tuple[Any, Any] | None:
            """(new GlobalVar, the call's result type) of one side of a pair, or None.

            Each function is transformed once per block and side.
            """
            gv = call.args[0]
            key = (gv.name_hint, block, side)
            if key not in self.made:
                make = _blocked_output if side == "out" else _blocked_input
                func = make(mod[gv], block)
                self.made[key] = None if func is None else self.builder_.add_func(
                    func, f"{gv.name_hint}_blocks_{side}")
            if self.made[key] is None:
                return None
            if side == "in":
                return self.made[key], call.ty
            n, c, h, w = (int(d) for d in call.ty.shape.values)
            return self.made[key], relax.TensorType((n, c // block, h, w, block), call.ty.dtype)

    return Rewriter
