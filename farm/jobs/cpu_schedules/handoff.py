"""A conv's output handed to the conv after it in channel blocks, not through NCHW.

farm legalizes every conv in channel blocks (NCHWc, :mod:`farm.jobs.
cpu_schedules.legalize`) but keeps NCHW between kernels: a conv's register
tile is written back transposed (a vector of channels to a plane each), and
a depthwise conv after it copies its input back into channel blocks, one
scalar load a plane apart per lane (``conv2d_pack_data``). onnxruntime keeps
NCHWc between its convs and reorders only where another operator needs NCHW
(its ``ReorderInput``/``ReorderOutput`` nodes). Here, after fusion, a fused
conv whose only reader is another conv writes ``[N, C/b, H, W, b]`` instead
(its tile stored as whole vectors), and that conv reads the layout: a
depthwise conv or a max pool with blocks of ``b`` (a vector per load, the
padding tested as it reads, no copy: ``rules._pads_blocks``), a 1x1 conv
one value at a time as before. Both functions' buffers go
through ``transform_layout``; the Relax call between them carries the
blocked tensor; a conv between two such (expand -> depthwise -> project)
reads and writes blocks. Untuned, 1 thread, AVX-512, one process
alternating (``bench/bench_ab_untuned.py``, 21 rounds, docs/benchmarks.md's history):
MobileNetV3-small 0.90-0.91x, MobileNetV2 0.78-0.82x, the other zoo models
(no pair, or one) unchanged; MobileNetV3-small's kernels alone sum 1.88 ->
1.71 ms, its depthwise 16 ch stride 2 conv on 112 x 112 0.098 -> 0.062 ms.

Not handed over: a result with a second reader (a residual add, a
squeeze-excite pool); a conv whose epilogue reads an NCHW tensor of its
output's shape (:func:`_reads_like_output`); a conv whose channels are
padded to whole vectors (handed over with zeros stored in the padding,
MobileNetV3-small ran 1.03x instead of 0.95x; a conv that only a
depthwise conv reads is not padded but keeps blocks of 8 for 72 channels
of 16 lanes, :func:`farm.jobs.cpu_schedules.legalize.depthwise_fed`, and
is handed over); a conv with padding as the
reader (:func:`_conv_input`); a conv with its pixels on one axis
(``PIXELS_CONV``, rows shorter than a tile: ResNet's 4 x 4 convs); and
functions a tuning database already scheduled (their records are of the
NCHW forms that ``tunable_module`` extracts).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from farm.jobs.cpu_schedules.legalize import BLOCKED_CONV, DEPTHWISE_CONV, DEPTHWISE_PACK

__all__ = ["blocked_handoffs"]


@dataclass(frozen=True)
class _Handoff:
    """One conv -> conv pair: the two bindings, their calls and the channel block."""

    producer: Any  # the conv's binding var (its call's output, read once)
    consumer: Any  # the reading conv's binding var
    calls: tuple[Any, Any]  # their ``call_tir``s
    block: int  # channels per block of both


def blocked_handoffs(mod: Any) -> Any:
    """``mod`` with each conv -> conv pair handed over in channel blocks.

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
    """The conv -> conv pairs of ``mod``'s ``main`` to hand over in channel blocks.

    A ``call_tir`` of a conv whose input is the output of a conv's
    ``call_tir`` that nothing else reads, both functions unscheduled, the
    first conv's blocks of output channels whole (none padded), its epilogue
    reading no other tensor of its output's shape, and, where the second is
    depthwise, its input blocks.
    """
    calls, uses = _bindings(mod["main"])
    found = []
    for var, call in calls.items():
        fields = call.args[1].fields
        data = fields[0] if len(fields) else None
        if data is None or data not in calls or uses.get(data, 0) != 1:
            continue
        reads = _conv_input(mod[call.args[0]])
        conv = _conv_blocks(mod[calls[data].args[0]])
        channels = [int(d) for d in data.ty.shape.values]
        if reads is not None and conv is not None and reads in (0, conv[-1]) \
                and conv[1] * conv[-1] == channels[1] and not _reads_like_output(calls[data]):
            found.append(_Handoff(data, var, (calls[data], call), conv[-1]))
    return found


def _reads_like_output(call: Any) -> bool:
    """Whether the call reads a tensor of its output's shape besides its first input.

    A residual add, or the broadcast multiply of a squeeze-excite block, in
    the conv's epilogue: with the output in blocks, its loads of that NCHW
    tensor would go a plane apart (MobileNetV3-small's 576 -> 96 conv with its
    residual add and its SE multiplies ran 1.5-4x slower so).
    """
    out = [int(d) for d in call.ty.shape.values]
    return any([int(d) for d in arg.ty.shape.values] == out
               for arg in list(call.args[1].fields)[1:]
               if getattr(arg.ty, "shape", None) is not None)


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


def _conv_input(func: Any) -> int | None:
    """How a conv function reads its input, or None for a function that is not such a conv.

    A depthwise conv copies it in channel blocks: their size, which the
    conv before it must write. A conv with no padding (1x1) reads it one
    value at a time (broadcast to the register tile): 0, any block will do.
    A padded one is left NCHW (None): its padded copy is a nest along the
    input's rows, which blocks would turn into loads 16 floats apart (det_head,
    ResNet-18: 1.02-1.05x slower whole, docs/benchmarks.md's history).
    """
    found = _named_block(func, DEPTHWISE_PACK)
    if found is not None:
        sch, block = found
        return int(sch.get(block).writes[0].source.shape[-1])
    found = _named_block(func, BLOCKED_CONV)
    if found is None:
        return None
    sch, block = found
    first = sch.get_child_blocks(sch.get_sblock("root"))[0]
    return 0 if sch.get(first).same_as(sch.get(block)) else None


def _conv_blocks(func: Any) -> list[int] | None:
    """The shape of a conv's blocked result (``[N, O/b, OH, OW, b]``), or None."""
    for name in (BLOCKED_CONV, DEPTHWISE_CONV):
        found = _named_block(func, name)
        if found is not None:
            sch, block = found
            return [int(d) for d in sch.get(block).writes[0].source.shape]
    return None


def _to_blocks(block: int) -> Any:
    """The index map NCHW -> ``[N, C/block, H, W, block]``."""
    return lambda n, c, y, x: (n, c // block, y, x, c % block)


def _blocked(func: Any, sides: _Sides, shape: list[int]) -> Any | None:
    """The conv's PrimFunc reading and/or writing channel blocks, or None where TVM refuses.

    The input (NCHW ``shape``) is the first read of the function's first
    block (the legalization's first compute: the depthwise copy or the 1x1
    conv itself); the output is the last block's write.
    """
    from tvm import s_tir

    sch = s_tir.Schedule(func)
    blocks = sch.get_child_blocks(sch.get_sblock("root"))
    reads = sch.get(blocks[0]).reads
    try:
        if sides.into:
            if not reads or [int(d) for d in reads[0].source.shape] != shape:
                return None
            sch.transform_layout(blocks[0], ("read", 0), _to_blocks(sides.into))
        if sides.out:
            sch.transform_layout(blocks[-1], ("write", 0), _to_blocks(sides.out))
    except (s_tir.schedule.ScheduleError, RuntimeError):
        return None
    return sch.mod["main"]


@dataclass(frozen=True)
class _Sides:
    """The channel blocks a call reads (``into``) and writes (``out``); 0: NCHW."""

    into: int = 0
    out: int = 0


def _sides(pairs: list[_Handoff]) -> dict[Any, _Sides]:
    """Binding var -> its :class:`_Sides` (a conv between two others reads and writes blocks)."""
    sides: dict[Any, _Sides] = {}
    for pair in pairs:
        sides[pair.producer] = _Sides(sides.get(pair.producer, _Sides()).into, pair.block)
        sides[pair.consumer] = _Sides(pair.block, sides.get(pair.consumer, _Sides()).out)
    return sides


def _rewriter() -> Any:
    """The Relax mutator class that rewrites the pairs' calls (TVM imported on use)."""
    from tvm import relax

    @relax.expr_functor.mutator
    class Rewriter(relax.PyExprMutator):
        """Each pair's two calls to new functions: the conv's result typed in blocks."""

        def __init__(self, mod: Any, pairs: list[_Handoff]) -> None:
            super().__init__(mod)
            self.mod = mod
            self.made: dict[tuple[str, _Sides], Any] = {}
            calls = {p.producer: p.calls[0] for p in pairs} | {p.consumer: p.calls[1]
                                                               for p in pairs}
            while True:  # a pair whose function TVM refuses goes, and its partner's side
                sides = _sides(pairs)
                found = {var: self._function(calls[var], side) for var, side in sides.items()}
                failed = {var for var, made in found.items() if made is None}
                if not failed:
                    break
                pairs = [p for p in pairs if p.producer not in failed
                         and p.consumer not in failed]
            self.plan: dict[Any, tuple[Any, Any]] = {}  # binding var -> (GlobalVar, type)
            added: dict[tuple[str, _Sides], Any] = {}
            for var, made in found.items():
                name, side = calls[var].args[0].name_hint, sides[var]
                if made is None:
                    continue
                if (name, side) not in added:
                    suffix = "_blocks" + "_in" * bool(side.into) + "_out" * bool(side.out)
                    added[(name, side)] = self.builder_.add_func(made[0], name + suffix)
                self.plan[var] = (added[(name, side)], made[1])

        def visit_var_binding_(self, binding: Any) -> None:
            if binding.var not in self.plan:
                super().visit_var_binding_(binding)
                return
            gv, ty = self.plan[binding.var]
            new = relax.call_tir(gv, self.visit_expr(binding.value.args[1]), ty)
            self.set_var_remap(binding.var, self.builder_.emit(new))

        def _function(self, call: Any, sides: _Sides) -> tuple[Any, Any] | None:
            """(new PrimFunc, the call's result type), or None where TVM refuses.

            Each function is transformed once per :class:`_Sides`.
            """
            gv = call.args[0]
            key = (gv.name_hint, sides)
            if key not in self.made:
                data = [int(d) for d in call.args[1].fields[0].ty.shape.values]
                self.made[key] = _blocked(self.mod[gv], sides, data)
            func = self.made[key]
            if func is None:
                return None
            ty = call.ty
            if sides.out:
                n, c, h, w = (int(d) for d in call.ty.shape.values)
                ty = relax.TensorType((n, c // sides.out, h, w, sides.out), call.ty.dtype)
            return func, ty

    return Rewriter
