"""ONNX -> Relax that survives real exports: simplify with fixed shapes when TVM refuses.

Exporters (PyTorch, Paddle2ONNX) write shapes as subgraphs computed at run
time: ``Shape -> Gather -> Cast -> Div -> Floor -> Cast -> Unsqueeze -> Concat
-> Reshape`` with a dynamic batch dimension. TVM 0.27's ONNX frontend folds
some of these into ``R.shape`` values, but not all: a ``Floor`` over a folded
``Div`` gets a scalar ``PrimValue`` where a tensor is required and raises
``TypeError`` (``relax.floor requires argument 0 (x) to be a tensor``).

farm always runs a model with concrete input shapes, so every such subgraph is
a constant. When the frontend refuses the model, it is simplified once with
onnx-simplifier (``onnxsim.simplify`` with ``overwrite_input_shapes``: shape
inference, constant folding and dead-node removal on the fixed shapes; a
library beats our own folding, which would have to evaluate every ONNX op) and
imported again. The job says so (``model_simplified`` log event and
:attr:`Imported.note`); onnxruntime's reference output is still computed from
the user's original file.

Failures name the user's file, the node and the op: the frontend converts
nodes in ``GraphConverter._construct_nodes`` (``tvm/relax/frontend/onnx/
onnx_frontend.py``), whose frame in the traceback still holds the ``node`` it
was converting.

Opset-11/12 exports of ``upsample(size=...)`` (torch.onnx, Paddle2ONNX) write
a ``Resize`` by ``sizes`` with ``scales`` an empty tensor, as those opsets
require (the ONNX operator spec: "only one of 'scales' and 'sizes' can be
specified"; an input can be left out by name only from opset 13). TVM 0.27's
converter takes any ``scales`` input as given and refuses the node ("Only one
of scales and sizes can be provided in Resize"), still after onnx-simplifier,
which keeps the empty tensor. Before the import such a ``scales`` input is left
out by name (:func:`drop_empty_resize_scales`), the form the converter reads
as "by sizes".

Every imported module then goes through the graph-level passes of
:mod:`farm.jobs.graph_passes` (batch norm folded into the conv or matmul
before it, no-op reshapes removed), so the build, the tuning job's task
extraction and the kernel profile all start from the same graph; the note
lists the passes that changed it (``graph_optimized`` log event).
"""

from __future__ import annotations

import contextlib
import io
import re
import warnings
from dataclasses import dataclass
from typing import Any

import structlog

from farm.errors import CompileError
from farm.jobs.graph_passes import optimize
from farm.jobs.tvm_errors import reason_of

__all__ = ["FRONTEND_ERRORS", "IMPORT_NOTE_FILE", "Imported", "drop_empty_resize_scales",
           "failed_node", "import_relax", "simplify"]

log = structlog.get_logger(__name__)

#: What TVM's frontend raises for a graph it cannot import: TVM's errors derive
#: from these builtins, unsupported operators raise the last two.
FRONTEND_ERRORS = (RuntimeError, ValueError, TypeError, KeyError, NotImplementedError,
                   AssertionError)

#: Written beside a cached library built from a simplified model: the note, so a
#: cache hit still says how the model was imported.
IMPORT_NOTE_FILE = "import.txt"


@dataclass(frozen=True)
class Imported:
    """A model imported into Relax.

    Attributes:
        mod: the Relax ``IRModule``, weights bound as constants, after the graph
            passes (:func:`farm.jobs.graph_passes.optimize`).
        note: ``"imported after simplification: <why>"`` when the original graph was
            refused, then ``"graph passes: <what each did>"`` when any changed the
            graph, joined by ``"; "``; None when neither.
        passes: what each graph pass that changed the graph did, in order.
    """

    mod: Any
    note: str | None
    passes: tuple[str, ...] = ()


def failed_node(exc: BaseException) -> str | None:
    """``node 'div_floor' (Floor)``: the node TVM's frontend was converting when it raised.

    Read from the ``node`` local of the frontend's ``_construct_nodes`` frame in
    ``exc``'s traceback; None when the error came from elsewhere (e.g. the
    unsupported-operator check before conversion, whose message lists the ops).
    """
    tb = exc.__traceback__
    node = None
    while tb is not None:
        if tb.tb_frame.f_code.co_name == "_construct_nodes":
            node = tb.tb_frame.f_locals.get("node", node)
        tb = tb.tb_next
    if node is None or not hasattr(node, "op_type"):
        return None
    return f"node {node.name or '(unnamed)'!r} ({node.op_type})"


#: TVM's type errors print the whole ``ir.Op(...)`` of the operator; its name is enough.
_OP_REPR = re.compile(r'ir\.Op\(.*?name="([\w.]+)".*?support_level=\d+\)')

#: At most this many characters of TVM's reason in one line.
_MAX_REASON_C = 300


def _unsupported_nodes(model: Any, reason: str) -> str | None:
    """``node 'x' (Op)`` for the ops the frontend's up-front check lists as unsupported."""
    _, sep, listed = reason.partition("not supported for frontend ONNX:")
    ops = {op.strip() for op in listed.split(",")} if sep else set()
    named = [f"node {n.name or '(unnamed)'!r} ({n.op_type})" for n in model.graph.node
             if n.op_type in ops]
    if not named:
        return None
    more = f" and {len(named) - 3} more" if len(named) > 3 else ""
    return ", ".join(named[:3]) + more


def _why(exc: BaseException, model: Any) -> str:
    where = failed_node(exc) or _unsupported_nodes(model, reason_of(exc))
    reason = _OP_REPR.sub(r"\1", reason_of(exc))
    if len(reason) > _MAX_REASON_C:
        reason = reason[: _MAX_REASON_C - 3] + "..."
    return f"{where}: {reason}" if where else reason


#: The frontend's warning about a Resize's ``scales`` left out by name (its per-node check).
_LEFT_OUT_SCALES = r"Node \(.*\)'s input 2 is marked single but has an empty string"


def _empty_tensors(model: Any) -> set[str]:
    """Names of the initializers and ``Constant`` outputs of ``model`` that hold no element."""
    from onnx import numpy_helper

    empty = {init.name for init in model.graph.initializer if 0 in init.dims}
    for node in model.graph.node:
        if node.op_type != "Constant":
            continue
        for attr in node.attribute:
            if attr.name == "value" and numpy_helper.to_array(attr.t).size == 0:
                empty.update(node.output)
    return empty


def drop_empty_resize_scales(model: Any) -> tuple[Any, int]:
    """``model`` with each ``Resize`` by ``sizes`` given its empty ``scales`` by name only.

    A ``Resize`` whose third input (``scales``) is a constant of no element
    and whose fourth (``sizes``) is given gets ``""`` as its third input, which
    ONNX reads as "not given" and TVM's converter as None (see the module doc).

    Args:
        model: an ``onnx.ModelProto``; not changed.

    Returns:
        ``(model, 0)`` when no node has that form, else ``(a copy with those
        nodes rewritten, how many)``.
    """
    resizes = [i for i, node in enumerate(model.graph.node)
               if node.op_type == "Resize" and len(node.input) == 4 and node.input[3]]
    if not resizes:
        return model, 0
    empty = _empty_tensors(model)
    rewrite = [i for i in resizes if model.graph.node[i].input[2] in empty]
    if not rewrite:
        return model, 0
    copy = type(model)()
    copy.CopyFrom(model)
    for i in rewrite:
        copy.graph.node[i].input[2] = ""
    return copy, len(rewrite)


def _from_onnx(model: Any, shapes: dict[str, list[int]], dtypes: dict[str, str]) -> Any:
    from tvm.relax.frontend.onnx import from_onnx

    # The frontend prints each failing node with its (possibly huge) inputs
    # before re-raising; the error says the same in one line. Its per-node
    # check warns of the scales drop_empty_resize_scales left out by name,
    # which opsets 11-12 call required; the converter reads it as intended.
    with contextlib.redirect_stdout(io.StringIO()), warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=_LEFT_OUT_SCALES, category=UserWarning)
        return from_onnx(model, shape_dict=shapes, dtype_dict=dtypes,
                         keep_params_in_input=False)


def simplify(model: Any, shapes: dict[str, list[int]], name: str) -> Any:
    """``model`` simplified by onnx-simplifier with every input's shape fixed.

    Args:
        model: an ``onnx.ModelProto``.
        shapes: input name -> concrete shape.
        name: the user's file name, for errors.

    Raises:
        CompileError: onnx-simplifier failed, or its result does not check.
    """
    import onnxsim

    try:
        simplified, ok = onnxsim.simplify(model, overwrite_input_shapes=shapes)
    except Exception as exc:  # onnxsim raises RuntimeError, ValueError, its C++ errors...
        raise CompileError(name, f"onnx-simplifier failed: {reason_of(exc)}") from exc
    if not ok:
        raise CompileError(name, "onnx-simplifier's result failed its own check")
    return simplified


def import_relax(model: Any, shapes: dict[str, list[int]], dtypes: dict[str, str],
                 name: str) -> Imported:
    """Import ``model``; if TVM's frontend refuses it, import it simplified.

    Args:
        model: an ``onnx.ModelProto`` (checked by :func:`farm.jobs.model.load_model`).
        shapes: input name -> concrete shape, e.g. ``{"images": [1, 3, 224, 224]}``.
        dtypes: input name -> numpy dtype name.
        name: the user's file name, e.g. ``detector.onnx`` (never the store's digest).

    Returns:
        The module after the graph passes and the note saying how it was imported.

    Raises:
        CompileError: the frontend refuses the model before and after simplification,
            naming ``name``, the node and the op, e.g. ``cannot compile m.onnx: node
            'floor' (Floor): ... (also after simplification)``; or a graph pass failed.
    """
    simplified_note = None
    identities = sum(node.op_type == "Identity" for node in model.graph.node)
    model, resizes = drop_empty_resize_scales(model)
    try:
        mod = _from_onnx(model, shapes, dtypes)
    except FRONTEND_ERRORS as exc:
        why = _why(exc, model)
        mod = _import_simplified(model, shapes, dtypes, name, why)
        simplified_note = f"imported after simplification: TVM's ONNX frontend refused {why}"
    return _optimized(mod, name, simplified_note, identities, resizes)


def _import_simplified(model: Any, shapes: dict[str, list[int]], dtypes: dict[str, str],
                       name: str, why: str) -> Any:
    """The Relax module of ``model`` simplified, which the frontend refused for ``why``."""
    try:
        simplified = simplify(model, shapes, name)
    except CompileError as exc:
        raise CompileError(name, f"{why} (and {exc.reason})") from exc
    try:
        mod = _from_onnx(simplified, shapes, dtypes)
    except FRONTEND_ERRORS as exc:
        raise CompileError(name, f"{_why(exc, simplified)} (also after simplification; "
                                 f"the original failed at {why})") from exc
    log.info("model_simplified", model=name, reason=why)
    return mod


def _optimized(mod: Any, name: str, simplified_note: str | None, identities: int,
               resizes: int = 0) -> Imported:
    """``mod`` after :func:`farm.jobs.graph_passes.optimize`, with the note of both steps.

    ``identities`` ``Identity`` nodes of the ONNX graph are said to be removed:
    the frontend maps each to its input (its ``Identity`` converter), so none
    reaches the Relax module. ``resizes``: the ``Resize`` nodes whose empty
    ``scales`` :func:`drop_empty_resize_scales` left out.

    Raises:
        CompileError: a pass failed on the graph (TVM's error, naming ``name``).
    """
    try:
        optimized = optimize(mod)
    except FRONTEND_ERRORS as exc:
        raise CompileError(name, f"graph passes failed: {reason_of(exc)}") from exc
    passes = ((f"removed {identities} Identity",) if identities else ()) \
        + ((f"dropped the empty scales of {resizes} Resize by sizes",) if resizes else ()) \
        + optimized.passes
    notes = [simplified_note] if simplified_note else []
    if passes:
        log.info("graph_optimized", model=name, passes=list(passes))
        notes.append("graph passes: " + ", ".join(passes))
    return Imported(optimized.mod, "; ".join(notes) or None, passes)
