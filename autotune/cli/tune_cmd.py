"""``autotune <op>``: tune one library op, one command per registered workload; ``autotune
tune --workload-file``: tune a workload defined in a Python file.

    autotune matmul -M 1024 -N 1024 -K 1024 --trials 1000
    autotune conv2d --N 1 --C 64 --H 56 --W 56 --K 64 --R 3 --S 3 --padding 1
    autotune tune --workload-file my_ops.py:my_gemv -p N=4096 -p K=4096 --trials 500

The commands are generated from the workload functions' signatures (``te.ops``): each
parameter becomes an option (single-letter extents as ``-M``/``--M``, bools as
``--bias/--no-bias``, the rest in kebab case), its default the library's. Only what a
signature cannot say is written down here: the types of a few parameter names
(``PARAM_TYPES``) and, for parameters the library requires, a typical size to tune when
none is given (``TYPICAL_SIZES``), so ``autotune matmul --trials 1000`` just works. The
dtypes a command offers are the ones its op accepts, asked of the op (``accepted_dtypes``).

``autotune tune`` takes the same tuning options (``options.tuning_options``); its
workload is what the file's function returns (``task_from_function``).
"""
from __future__ import annotations

import functools
import hashlib
import importlib.util
import inspect
import os
import re
import sys
import warnings
from pathlib import Path
from typing import Callable

import click

import schedule
import te
from te.ops.elementwise import ELEMENTWISE_OPS

from .. import anchor as anchors
from .. import targets
from ..console import EXIT_INTERRUPTED
from ..task import Task
from . import options as opt
from .report import ProgressBar, print_summary

_PAIR_HELP = "an int or H,W"

#: name -> (click type, help) for parameters whose type the signature cannot tell.
PARAM_TYPES = {
    "shape": (opt.IntList(), "Tensor shape, comma-separated."),
    "axis": (int, "Axis to reduce over (negative counts from the end)."),
    "stride": (opt.IntOrPair(), f"Window stride: {_PAIR_HELP}."),
    "padding": (opt.Padding(), "Zero padding: an int (every side), H,W, or TOP,LEFT,BOTTOM,RIGHT "
                               "(conv2d; pooling takes an int or H,W)."),
    "dilation": (opt.IntOrPair(), f"Kernel dilation: {_PAIR_HELP}."),
    "kernel": (opt.IntOrPair(), f"Pooling window: {_PAIR_HELP}."),
    "layout": (click.Choice(["NCHW", "NHWC"]), "Data layout."),
    "eps": (click.FloatRange(min=0, min_open=True), "Added to the variance before the square root."),
    "pool_type": (click.Choice(["max", "avg"]), "Pooling kind."),
    "op": (click.Choice(list(ELEMENTWISE_OPS)), "Element-wise operator."),
    "tile": (opt.POSITIVE_INT, "Output tile of Winograd's F(m x m, 3 x 3): 2 (2.25x fewer products) "
                                       "or 4 (4x fewer, more rounding)."),
}

#: Help of the dtype parameters; their choices are the op's own (``accepted_dtypes``).
DTYPE_HELP = {
    "dtype": "Element type of the inputs.",
    "out_dtype": "Output type; without --acc-dtype also the accumulation type (default: from dtype).",
    "acc_dtype": "Accumulate in this wider type, then cast the result to --out-dtype (default: dtype), "
                 "as fp16 GEMM libraries do with float32.",
}

#: Help of the boolean parameters (their type comes from the default).
FLAG_HELP = {
    "bias": "Add a bias vector to the product.",
    "relu": "Apply relu to the result.",
    "transpose_a": "A is stored transposed.",
    "transpose_b": "B is stored transposed.",
    "causal": "Mask the keys after each query (decoder attention).",
}

#: Sizes tuned when a required parameter is not given (typical, not special).
TYPICAL_SIZES = {
    "matmul": dict(M=1024, N=1024, K=1024),
    "batch_matmul": dict(B=16, M=256, N=256, K=256),
    "dense": dict(M=1024, N=1024, K=1024),
    "conv2d": dict(N=1, C=64, H=56, W=56, K=64, R=3, S=3),
    "depthwise_conv2d": dict(N=1, C=256, H=56, W=56, R=3, S=3),
    "softmax": dict(shape=[128, 1024]),
    "pool2d": dict(N=1, C=64, H=112, W=112, kernel=2),
    "elementwise": dict(op="add", shape=[1024, 1024]),
    "elementwise_chain": dict(shape=[1024, 1024]),
    "layernorm": dict(M=4096, N=1024),
    "mlp": dict(M=512, D=768, H=3072),
    "qkv": dict(M=128, D=768),
    "attention": dict(heads=12, seq=512, dim=64),
    "conv2d_bn_relu": dict(N=1, C=64, H=56, W=56, K=64, R=3, S=3),
    "conv2d_winograd": dict(N=1, C=64, H=56, W=56, K=64),
}

#: One example per command, shown in its --help (the README shows the same ones).
EXAMPLES = {
    "matmul": "autotune matmul -M 1024 -N 1024 -K 1024 --dtype float32 --trials 1000",
    "batch_matmul": "autotune batch_matmul -B 16 -M 256 -N 256 -K 256 --trials 500",
    "dense": "autotune dense -M 256 -N 1024 -K 1024 --bias --relu --trials 500",
    "conv2d": "autotune conv2d --N 1 --C 64 --H 56 --W 56 --K 64 --R 3 --S 3 --padding 1 --trials 500",
    "depthwise_conv2d": "autotune depthwise_conv2d --N 1 --C 256 --H 56 --W 56 --R 3 --S 3 --stride 2 --trials 300",
    "softmax": "autotune softmax --shape 128,1024 --axis -1 --trials 200",
    "pool2d": "autotune pool2d --N 1 --C 64 --H 112 --W 112 --kernel 3 --stride 2 --padding 1 --pool-type max",
    "elementwise": "autotune elementwise --op sigmoid --shape 1024,1024 --trials 100",
    "elementwise_chain": "autotune elementwise_chain --shape 4096,1024 --trials 100",
    "layernorm": "autotune layernorm -M 4096 -N 1024 --eps 1e-5 --trials 200",
    "mlp": "autotune mlp -M 512 -D 768 -H 3072 --trials 200",
    "qkv": "autotune qkv -M 128 -D 768 --trials 300",
    "attention": "autotune attention --heads 12 --seq 512 --dim 64 --causal --trials 200",
    "conv2d_bn_relu": "autotune conv2d_bn_relu --N 1 --C 64 --H 56 --W 56 --K 64 --R 3 --S 3 --padding 1 --trials 200",
    "conv2d_winograd": "autotune conv2d_winograd --N 1 --C 128 --H 28 --W 28 --K 128 --padding 1 --tile 4 --trials 300",
}


def workload_param_options(op: str) -> list[click.Option]:
    """One click option per parameter of workload ``op``'s function."""
    fn = te.workload.get_workload_function(op)
    typical = TYPICAL_SIZES.get(op, {})
    result = []
    for p in inspect.signature(fn).parameters.values():
        default = typical.get(p.name) if p.default is inspect.Parameter.empty else p.default
        result.append(_param_option(op, p.name, default, required=default is None and p.default is inspect.Parameter.empty))
    return result


def command_defaults(op: str) -> dict:
    """The workload parameters ``autotune OP`` tunes when given no option: the signature's
    defaults and, for the parameters without one, ``TYPICAL_SIZES``."""
    fn = te.workload.get_workload_function(op)
    defaults = {p.name: p.default for p in inspect.signature(fn).parameters.values()
                if p.default is not inspect.Parameter.empty}
    return {**defaults, **TYPICAL_SIZES.get(op, {})}


@functools.lru_cache(maxsize=None)
def accepted_dtypes(op: str) -> tuple[str, ...]:
    """The dtypes workload ``op`` accepts, asked of the op itself: every dtype of te is tried
    on the workload of the command's defaults, and those the op refuses (``te.DTypeError``)
    are left out. So the choices follow the op's own checks (bool has no arithmetic, softmax
    takes floats) and no list is kept per command. Another option may narrow them further
    (elementwise --op sigmoid takes floats only); the op's check then says so."""
    params = command_defaults(op)
    accepted = []
    for dtype in te.dtypes.SUPPORTED_DTYPES:
        try:
            te.create_workload(op, **{**params, "dtype": dtype})
        except te.DTypeError:
            continue
        accepted.append(dtype)
    return tuple(accepted)


def _param_type(op: str, name: str) -> tuple:
    """(click type, help) of workload parameter ``name`` of ``op`` (not a bool)."""
    if name in DTYPE_HELP:
        return click.Choice(accepted_dtypes(op)), DTYPE_HELP[name]
    return PARAM_TYPES.get(name, (opt.POSITIVE_INT, f"Extent {name} of the {op} workload."))


def _param_option(op: str, name: str, default, required: bool) -> click.Option:
    kebab = name.replace("_", "-")
    if isinstance(default, bool):
        return click.Option([f"--{kebab}/--no-{kebab}", name], default=default, show_default=True,
                            help=FLAG_HELP.get(name, f"{name} of the {op} workload."))
    decls = [f"-{name}", f"--{name}", name] if len(name) == 1 else [f"--{kebab}", name]
    kind, help_text = _param_type(op, name)
    if isinstance(default, list):
        default = ",".join(map(str, default))
    return click.Option(decls, type=kind, default=default, required=required, show_default=default is not None,
                        help=help_text)


#: Columns of help text (click's own width at 80 columns), and the indent of an example in it.
HELP_WIDTH = 80
_EXAMPLE_INDENT = 6


def plain_text(doc: str) -> str:
    """A docstring line as help text: reST literals (double backticks) as `x`."""
    return re.sub(r"``(.+?)``", r"`\1`", doc)


def shell_lines(command: str, width: int = HELP_WIDTH - _EXAMPLE_INDENT) -> list[str]:
    """``command`` broken into lines of at most ``width`` columns, continued with a
    backslash as a shell reads them (continuation lines indented four spaces). Lines
    break before an option only, so each option stays beside its value."""
    lines, line = [], ""
    for unit in _option_units(command):
        indent = "    " if lines else ""
        if line and len(indent + line + " " + unit + " \\") > width:
            lines.append(indent + line + " \\")
            line = unit
        else:
            line = f"{line} {unit}" if line else unit
    return lines + [("    " if lines else "") + line]


def _option_units(command: str) -> list[str]:
    """The words of ``command`` grouped as they belong together: the program and its
    command words, then each option with its values ("--axis -1": -1 is a value)."""
    units: list[str] = []
    for word in command.split():
        if not units or (word.startswith("-") and not re.fullmatch(r"-\d+", word)):
            units.append(word)
        else:
            units[-1] += " " + word
    return units


def op_help(op: str) -> str:
    """The --help text of ``autotune OP``: the workload's first docstring line, its example."""
    doc = plain_text((inspect.getdoc(te.workload.get_workload_function(op)) or op).splitlines()[0])
    example = "\n".join("    " + line for line in shell_lines(EXAMPLES.get(op, f"autotune {op}")))
    return f"Tune the {op} workload: {doc}\n\n\b\nExample:\n{example}"


def make_op_command(op: str) -> click.Command:
    fn = te.workload.get_workload_function(op)
    help_text = op_help(op)
    param_names = list(inspect.signature(fn).parameters)

    @opt.tuning_options
    def command(**kwargs):
        params = {name: kwargs.pop(name) for name in param_names}
        params = {k: v for k, v in params.items() if v is not None}
        run_tuning(op, params, **kwargs)

    cmd = click.command(name=op, help=help_text, short_help=f"Tune {op}.")(command)
    clash = set(param_names) & {p.name for p in cmd.params}
    if clash:
        raise RuntimeError(f"workload {op!r} has parameters named like tuning options: {', '.join(sorted(clash))}")
    cmd.params[:0] = workload_param_options(op)
    return cmd


# ---------------------------------------------------------------- running one tuning session


def measure_anchor(task, timing) -> "anchors.AnchorFigure | str":
    """The anchor's figure (the target kind's: NumPy on cpu, cuBLAS on cuda) measured with the
    candidates' ``timing`` protocol, or why there is none."""
    return targets.parts_for(task.target).anchor.measure(task, timing)


def anchor_report(before, after) -> dict:
    """What the summary says of the anchor, from its figures before and after tuning (or the
    reason there is none): the faster figure (noise only slows a run down), both figures,
    and a warning when they disagree by more than the noise allowance."""
    if isinstance(after, str):
        return dict(why=after)
    found = dict(name=after.name, gflops=max(before.gflops, after.gflops), blas=after.blas,
                 before=before.gflops, after=after.gflops, rounds=len(after.round_gflops))
    problem = anchors.disagreement(before, after)
    if problem is not None:
        found["warning"] = problem
    return found


def _anchor_after(task, timing, before, result):
    """The anchor's figure after tuning: the final timing's (measured next to the candidates)
    when it timed the anchor, else measured here now; or why there is none."""
    if not isinstance(before, anchors.AnchorFigure):
        return before
    final = result.final
    rounds = final.winner_anchor_rounds if final is not None else None
    if rounds:
        return anchors.AnchorFigure(final.anchor_name, tuple(task.flops / s / 1e9 for s in rounds), before.blas)
    return measure_anchor(task, timing)


#: Most work a simulated run accepts (the emulator runs a candidate in about a second).
SIMULATED_MAX_FLOPS = 1 << 29


def run_tuning(op: str, params: dict, **options) -> None:
    """Tune registered workload ``op`` with ``params`` (an op command)."""
    tune_task(lambda target: Task(op, params, target), **options)


def tune_task(make_task: Callable[[str], Task], *, trials: int, target: str, tuner: str, db_url: str | None,
              seed: int, timeout: float, rounds: int, resume: bool, early_stopping: int | None, batch_size: int,
              transfer: bool, anchor: bool, progress: bool | None, print_passes: bool = False, share: bool = True,
              cluster: str | None = None, final: int = 5, simulate: bool = False) -> None:
    """One tuning session of the task ``make_task(target spec)`` with the tuning options
    (``simulate`` is in ``target`` already: ``--simulate`` makes it the simulated kind)."""
    if cluster is not None and not print_passes:
        with _connect_cluster(cluster, target) as executor:
            anchor_note = "no anchor: the cluster's nodes measure, not this machine (bench/distributed.py compares)"
            _tune_task(make_task, executor=executor, trials=trials, target=str(executor.target()), tuner=tuner,
                       db_url=db_url, seed=seed, timeout=timeout, rounds=rounds, resume=resume,
                       early_stopping=early_stopping, batch_size=batch_size, transfer=transfer,
                       anchor=anchor_note if anchor else False, progress=progress, share=share, final=final)
        return
    _tune_task(make_task, trials=trials, target=target, tuner=tuner, db_url=db_url, seed=seed, timeout=timeout,
               rounds=rounds, resume=resume, early_stopping=early_stopping, batch_size=batch_size, transfer=transfer,
               anchor=anchor, progress=progress, print_passes=print_passes, share=share, final=final)


def _connect_cluster(address: str, target: str):
    """The RayExecutor of ``--cluster`` (a ClickException with the reason when it cannot)."""
    from ..cluster import ClusterError, RayExecutor

    kind = "cpu" if target == targets.AUTO else target
    try:
        executor = RayExecutor(address, spec=kind)
    except ClusterError as exc:
        raise click.ClickException(str(exc)) from None
    for node, why in executor.excluded:
        click.echo(f"note: not measuring on {getattr(node, 'node_id', node)}: {why}", err=True)
    for warning in executor.warnings:
        click.echo(f"warning: {warning}", err=True)
    return executor


def _tune_task(make_task: Callable[[str], Task], *, trials: int, target: str, tuner: str, db_url: str | None,
               seed: int, timeout: float, rounds: int, resume: bool, early_stopping: int | None, batch_size: int,
               transfer: bool, anchor: bool | str, progress: bool | None, print_passes: bool = False,
               share: bool = True, executor=None, final: int = 5) -> None:
    """``tune_task`` here (``executor`` None) or on a cluster; ``anchor`` may be the reason
    there is none."""
    from ..final_timing import FinalTimingOptions
    from ..runner import TimingOptions

    chosen, note = targets.resolve(target)  # "auto": the best kind measurable here
    task = make_task(executor.target() if executor is not None else chosen)
    op = task.workload_name
    if print_passes:
        print_lowering_passes(task, db_url)
        return
    if executor is None:
        task.check_fits_memory()  # before the database is opened or any array made
    if targets.is_simulated(task.target) and task.flops > SIMULATED_MAX_FLOPS:
        raise click.ClickException(
            f"--simulate runs every candidate on the CPU emulator, a block's threads one after another: "
            f"{task.key} is {task.flops:.3g} flops, over the {SIMULATED_MAX_FLOPS:.3g} that take seconds per "
            f"candidate there; simulate a smaller shape")
    reason_for_no_anchor = anchor if isinstance(anchor, str) else "no anchor: --no-anchor"
    final_anchor = anchor is not False  # on a cluster the final timing times it on a node
    anchor = anchor is True
    wants_clean_blas = targets.parts_for(task.target).anchor.wants_clean_blas(task)
    if anchor and wants_clean_blas and anchors.blas_overrides_set():
        names = " and ".join(anchors.blas_overrides_set())
        click.echo(f"note: restarting without {names}, which would slow the NumPy anchor", err=True)
        anchors.reexec_without_blas_overrides()
    timing = TimingOptions(rounds=rounds)
    with opt.open_db(db_url) as db:
        before = measure_anchor(task, timing) if anchor else reason_for_no_anchor
        from ..tuning import tune  # after the cheap checks: the tuners import XGBoost, which takes seconds

        bar = ProgressBar(trials, progress, op, simulated=targets.is_simulated(task.target))
        try:  # Ctrl-C or SIGTERM (see interrupts.py): the batch in flight is dropped, the run marked interrupted
            result = tune(task, trials=trials, tuner=tuner, db=db, seed=seed, callbacks=[bar],
                          batch_size=batch_size, early_stopping=early_stopping, timeout=timeout, resume=resume,
                          transfer=transfer, timing=timing, share=share, executor=executor,
                          final=FinalTimingOptions(candidates=final, anchor=final_anchor) if final else None)
        except KeyboardInterrupt:
            bar.close()
            click.echo(f"interrupted after {bar.trials_done} trials; every finished batch is stored in "
                       f"{db.location}; rerun with --resume to continue", err=True)
            raise SystemExit(EXIT_INTERRUPTED) from None
        bar.close()
        found = anchor_report(before, _anchor_after(task, timing, before, result))
        if executor is None and result.best is not None:
            found["peak"] = targets.machine_peak(task)  # measured once the measuring process is gone
        if found.get("warning"):
            click.echo(f"warning: {found['warning']}", err=True)
        where = targets.describe(task.target) if executor is None else executor.describe(task.target)
        print_summary(task, where, result, db, found, picked=note)
        if result.best is None:
            raise click.ClickException("no trial succeeded; `autotune log errors` shows why")


def print_lowering_passes(task: Task, db_url: str | None) -> None:
    """The IR of the schedule ``autotune.build`` would use, after each pass of the target's
    pipeline. Reads the database only: a missing one means nothing is tuned."""
    from tuning_db import NoDatabaseError, NoTunedConfigWarning

    from ..dispatch import best_config, default_config

    with warnings.catch_warnings():  # the first line below says so when nothing is tuned
        warnings.simplefilter("ignore", NoTunedConfigWarning)
        try:
            with opt.open_db(db_url, create=False) as db:
                config, record = best_config(task, db)
        except NoDatabaseError:
            config, record = default_config(task), None
    which = f"record {record.id}" if record is not None else "the default schedule (no record stored)"
    click.echo(f"# {task.key} on {task.target}, {which}: {config}")
    s, args = task.space.apply(config)
    schedule.lower(s, args, trace=True, pipeline=task.target.kind_info.pipeline)


def op_commands() -> list[click.Command]:
    """One command per library workload."""
    return [make_op_command(op) for op in te.list_workloads()]


# ---------------------------------------------------------------- autotune tune --workload-file


def parse_param_value(text: str):
    """A ``-p NAME=VALUE`` value: an int, a float, a bool (true/false), a comma list of ints,
    else the string itself."""
    for parse in (int, float):
        try:
            return parse(text)
        except ValueError:
            pass
    if text.lower() in ("true", "false"):
        return text.lower() == "true"
    if "," in text:
        try:
            return [int(part) for part in text.split(",")]
        except ValueError:
            pass
    return text


def parse_params(ctx, param, items: tuple[str, ...]) -> dict:
    """The ``-p NAME=VALUE`` options as a dict (a click callback: a malformed one is a usage error)."""
    params = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not name.isidentifier():
            raise click.BadParameter(f"{item!r} is not NAME=VALUE", ctx, param)
        params[name] = parse_param_value(value)
    return params


def load_workload_function(spec: str) -> tuple[Callable, str]:
    """(function, path) named by ``PATH.py:FUNC``, the file imported as a module (so the
    workloads it registers are registered). A missing file or function is a ``BadParameter``;
    an error while importing the file a ``ClickException`` naming it."""
    path_text, sep, func_name = spec.rpartition(":")
    if not sep or not path_text or not func_name:
        raise click.BadParameter(f"{spec!r} is not PATH.py:FUNC")
    path = Path(path_text)
    if not path.is_file():
        raise click.BadParameter(f"no such file: {path_text}")
    module_name = "autotune_workload_file_" + hashlib.sha256(str(path.resolve()).encode()).hexdigest()[:12]
    loader_spec = importlib.util.spec_from_file_location(module_name, path)
    if loader_spec is None or loader_spec.loader is None:
        raise click.BadParameter(f"{path_text} is not a Python file")
    module = importlib.util.module_from_spec(loader_spec)
    sys.modules[module_name] = module
    try:
        loader_spec.loader.exec_module(module)
    except Exception as exc:  # the user's file: one line, not our traceback
        if os.environ.get("AUTOTUNE_DEBUG"):
            raise
        raise click.ClickException(f"{path_text} failed to import: {type(exc).__name__}: {exc}") from None
    fn = getattr(module, func_name, None)
    if not callable(fn):
        raise click.BadParameter(f"{path_text} has no function {func_name!r}")
    return fn, path_text


def task_from_function(fn: Callable, params: dict, target: str, where: str) -> Task:
    """The task of workload function ``fn`` called with ``params``: a registered one by its
    name (defaults filled in, its usual key), a plain one from the tensors it returns."""
    name = te.workload.registered_name(fn)
    if name is not None:
        return Task(name, params, target)
    try:
        inspect.signature(fn).bind(**params)
    except TypeError as exc:
        raise click.BadParameter(f"{fn.__name__}{inspect.signature(fn)}: {exc}", param_hint="'-p'") from None
    tensors = fn(**params)
    if tensors is None or isinstance(tensors, te.Tensor) or not isinstance(tensors, (list, tuple)) or not tensors:
        raise click.ClickException(f"{where}:{fn.__name__} returned no tensors ({tensors!r}); a workload "
                                   f"function returns [inputs..., outputs...]")
    return Task.from_tensors(list(tensors), fn.__name__, target)


TUNE_HELP = f"""Tune a workload defined in a Python file.

FUNC is a function returning the workload's tensors, placeholders first, then outputs
(the kernel's argument order), or a function registered with `te.register_workload`.
It is called with the -p parameters (values are read as int, float, true/false, a
comma list of ints, else a string). A plain function's workload is keyed by its name
and its DAG's hash; a registered one by its name and parameters.

\b
Example:
{chr(10).join("    " + line for line in shell_lines(
    "autotune tune --workload-file my_ops.py:my_gemv -p N=4096 -p K=4096 --trials 500"))}"""


@click.command(name="tune", help=TUNE_HELP, short_help="Tune a workload defined in a Python file.")
@click.option("--workload-file", "workload_file", required=True, metavar="PATH.py:FUNC",
              help="The file and the function that builds the workload.")
@click.option("-p", "--param", "params", multiple=True, metavar="NAME=VALUE", callback=parse_params,
              help="A parameter of FUNC (repeat for each).")
@opt.tuning_options
def tune_file_cmd(workload_file: str, params: dict, **options) -> None:
    try:
        fn, where = load_workload_function(workload_file)
    except click.BadParameter as exc:
        exc.param_hint = "'--workload-file'"
        raise
    tune_task(lambda target: task_from_function(fn, params, target, where), **options)
