import re

import torch

from oracles.checks import Tolerance, classify_exception, compare_outputs, summarize
from oracles.script_checks import check_source, error_pattern
from oracles.verdict import Signature, Verdict, answers, normalize_message


def test_normalize_makes_numbers_and_addresses_generic():
    assert normalize_message("KeyError: 'buf12'\n\nmore") == normalize_message("KeyError: 'buf3'")
    assert normalize_message("at 0x7f00ab12 in /usr/lib/x/libfoo.so") == "at <addr> in <path>/libfoo.so"
    assert normalize_message("no converter for aten::sin") != normalize_message("no converter for aten::cos")


def test_a_first_line_that_only_leads_to_the_next_keeps_the_next_in_the_signature():
    """ExecuTorch 1.4.1's to_edge says "These operators are taking Tensor inputs with mismatched
    dtypes:" and names the op on the next line: the signature and repro.py's pattern kept the
    first line alone, so any op's dtype error was "the same bug" (a hunt: complex RoPE)."""
    said = ("These operators are taking Tensor inputs with mismatched dtypes:\n\nOperator: <EdgeOpOverload: "
            "aten.%s.Tensor>: schema = aten::%s.Tensor(Tensor self, Tensor other) -> Tensor with args: {'self': "
            "torch.complex64, 'other': torch.complex64, '__ret_0': torch.complex64}\nstack trace: File \"m.py\", "
            "line 3, in forward\nPlease make sure the dtypes of the Tensor inputs are the same")
    mul, add = said % ("mul", "mul"), said % ("add", "add")
    sig = Signature.of(Verdict("crash", "SpecViolationError", mul))
    assert "aten.mul.Tensor" in sig.message and "stack trace" not in sig.message, sig.message
    assert "aten.mul.Tensor" in Verdict("crash", "SpecViolationError", mul).describe()  # the bug: line too
    assert sig.matches(Verdict("crash", "SpecViolationError", mul.replace("line 3", "line 9")))
    assert not sig.matches(Verdict("crash", "SpecViolationError", add))
    assert re.search(error_pattern(sig, None), mul) and not re.search(error_pattern(sig, None), add)
    # not any line after a ":": Triton's leads to a kernel whose name each cut changes
    triton = "at 5:11:\ndef triton_poi_fused_%s_0(in_ptr0, out_ptr0, xnumel, XBLOCK : tl.constexpr):"
    assert Signature.of(Verdict("crash", "CompilationError", triton % "add_mul")).matches(
        Verdict("crash", "CompilationError", triton % "mul"))
    assert "more" not in normalize_message("KeyError: 'buf12'\nmore")


def test_names_a_cut_changes_are_one_bug_and_the_scripts_pattern_finds_them():
    """Seen on TensorRT-RTX 1.4 and ONNX Runtime 1.32 (a hunt): each cut renamed the fused
    region or the value the error names, so 10 candidates failing with the same words were
    "another bug" and the reduction stopped at 9 nodes of TensorRT's (1 with --any-failure),
    at 2 of ONNX Runtime's (1 where the value was fed in)."""
    q8 = ("building the engine failed: IBuilder::buildSerializedNetwork: Error Code 1: Internal Error (Node "
          "{ForeignNode[%s]} cannot be quantized by q. You might want to add a DQ node before {ForeignNode[%s]}.")
    pow8 = ("[ONNXRuntimeError] : 10 : INVALID_GRAPH : Load model from /tmp/x/model.onnx failed:This is an invalid "
            "model. Type Error: Type 'tensor(int8)' of input parameter (%s) of operator (Pow) in node (node_pow_1) is "
            "invalid.")
    for template, names, other in ((q8, ("c_bias...node_tanh", "node_tanh...node__to_copy"), "cannot be fused"),
                                   (pow8, ("_to_copy", "to"), "of operator (Mul)")):
        first, second = (template.replace("%s", n) for n in names)
        sig = Signature.of(Verdict("crash", "TensorRTError", first))
        assert sig.matches(Verdict("crash", "TensorRTError", second)), normalize_message(second)
        assert re.search(error_pattern(sig, None), second) and re.search(error_pattern(sig, None), first)
        changed = second.replace("cannot be quantized by q", other).replace("of operator (Pow)", other)
        assert not sig.matches(Verdict("crash", "TensorRTError", changed))  # the words around the names still count


def test_crash_signature_requires_same_type_and_message():
    sig = Signature.of(Verdict("crash", "RuntimeError", "no converter for aten::sin (node 17)"))
    assert sig.matches(Verdict("crash", "RuntimeError", "no converter for aten::sin (node 3)"))
    assert not sig.matches(Verdict("crash", "RuntimeError", "no converter for aten::cos (node 3)"))
    assert not sig.matches(Verdict("crash", "ValueError", "no converter for aten::sin (node 3)"))
    assert not sig.matches(Verdict("mismatch", max_abs=1.0))
    assert sig.matches(Verdict("mismatch", max_abs=1.0), any_failure=True)


def test_a_deaths_site_is_kept_as_said_and_judged_where_both_deaths_have_one():
    """A worker's death (oracles/worker.py): the signal and, where the fault handler told, the
    innermost Python function and its caller. Two sites are two bugs, though their names
    differ by a digit alone; a death in a thread with no Python frame has no site, and
    matches either way (which thread faults may vary); --match may name the signal alone."""
    conv2d = Verdict("crash", "Signal", "SIGSEGV in _lower_conv2d (called from convert)")
    sig = Signature.of(conv2d)
    assert sig.matches(conv2d) and sig.message == conv2d.message
    assert not sig.matches(Verdict("crash", "Signal", "SIGSEGV in _lower_conv3d (called from convert)"))
    assert not sig.matches(Verdict("crash", "Signal", "SIGABRT in _lower_conv2d (called from convert)"))
    assert sig.matches(Verdict("crash", "Signal", "SIGSEGV"))  # a pool thread's: no Python frame
    assert Signature.of(Verdict("crash", "Signal", "SIGSEGV")).matches(conv2d)
    assert answers(conv2d, "crash", "Signal: SIGSEGV$") and answers(conv2d, "crash", "_lower_conv2d")


def test_tensorrts_own_words_after_its_long_prefix_are_the_signature():
    """TensorRT-RTX's real builder error: its words ("Strided & Dilated Deconv not
    supported") come after 200 characters of prefixes; another check failing at the same
    place is another bug, for the reduction and for the script's ERROR_PATTERN."""
    said = ("building the engine failed: IBuilder::buildSerializedNetwork: Error Code 1: Myelin "
            "([myelin_graph.h:1250: attachExceptionMsgToGraph] MyelinCheckException: cudnn_impl.cpp:1240: "
            "CHECK(false) failed. {} In compileGraph at /_src/optimizer/myelin/codeGenerator.cpp:1783)")
    deconv = Verdict("crash", "TensorRTError", said.format("Strided & Dilated Deconv not supported by cuDNN"))
    other = Verdict("crash", "TensorRTError", said.format("Strided Grouped Conv not supported by cuDNN"))
    sig = Signature.of(deconv)
    assert "Strided & Dilated Deconv not supported by cuDNN" in sig.message
    assert sig.matches(deconv) and not sig.matches(other)
    pattern = error_pattern(sig, None)
    assert re.search(pattern, deconv.message) and not re.search(pattern, other.message), pattern
    # a cut inside a placeholder ("... at <pa") would make the pattern need "<pa" literally
    for pad in range(280, 300):
        message = "x" * pad + " at /_src/optimizer/api/network.cpp:1234 and 0x7f00 then 12 more"
        pattern = error_pattern(Signature.of(Verdict("crash", "TensorRTError", message)), None)
        assert re.search(pattern, message), (pad, pattern[-40:])


def test_mismatch_signature_rejects_rounding_sized_errors():
    sig = Signature.of(Verdict("mismatch", max_abs=2.0))
    assert sig.matches(Verdict("mismatch", max_abs=8e9))
    assert sig.matches(Verdict("mismatch", max_abs=0.01))
    assert not sig.matches(Verdict("mismatch", max_abs=1e-5))


def test_compare_outputs_kinds():
    tol = Tolerance(1e-3, 1e-3)
    a = torch.ones(4)
    assert compare_outputs([a], [a.clone()], tol).kind == "pass"
    v = compare_outputs([a], [a + 0.5], tol)
    assert v.kind == "mismatch" and v.output == 0 and abs(v.max_abs - 0.5) < 1e-6
    nan = a.clone()
    nan[1] = float("nan")
    assert compare_outputs([a], [nan], tol).kind == "nan"
    assert compare_outputs([nan], [nan.clone()], tol).kind == "pass"  # NaN in both is agreement
    assert compare_outputs([a], [torch.ones(5)], tol).kind == "mismatch"


def test_integers_get_no_relative_tolerance():
    big = torch.tensor([1_764_460_800_000_000_000])
    v = compare_outputs([big], [big + 8_589_934_592], Tolerance(1e-3, 1e-3))
    assert v.kind == "mismatch" and v.max_abs == 8_589_934_592
    # nor a relative error, which where eager's value is 0 read as 1e+12
    ids = compare_outputs([torch.tensor([0, 5])], [torch.tensor([3, 5])], Tolerance(1e-3, 1e-3))
    assert ids.max_rel is None and "max rel" not in ids.describe() and "max abs 3 " in ids.describe()
    floats = compare_outputs([torch.tensor([1.0])], [torch.tensor([1.5])], Tolerance(1e-3, 1e-3))
    assert "(max rel 0.5)" in floats.describe()


def test_classify_oom_and_crash():
    assert classify_exception(torch.OutOfMemoryError("CUDA out of memory")).kind == "oom"
    assert classify_exception(MemoryError()).kind == "oom"
    v = classify_exception(RuntimeError("boom"))
    assert (v.kind, v.exc_type, v.message) == ("crash", "RuntimeError", "boom")


def test_repro_oom_pattern_takes_every_error_trtmin_calls_an_oom():
    """repro.py judges an OOM by error_pattern: it must take what classify_exception counts
    (a host allocation over --memory-limit says "can't allocate memory"), and no crash."""
    pat = error_pattern(Signature("oom"), None)
    ooms = [torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB"), MemoryError(),
            RuntimeError("[enforce fail at alloc_cpu.cpp:127] err == 0. DefaultCPUAllocator: can't allocate memory: "
                         "you tried to allocate 4294967296 bytes. Error code 12 (Cannot allocate memory)"),
            RuntimeError("CUDA error: OUT OF MEMORY")]
    for e in ooms:
        assert classify_exception(e).kind == "oom", e
        assert re.search(pat, f"{type(e).__name__}: {e}"), e
    for e in [RuntimeError("boom"), ValueError("MemoryErrors are not raised here")]:
        assert classify_exception(e).kind == "crash", e
        assert not re.search(pat, f"{type(e).__name__}: {e}"), e


def test_error_pattern_matches_the_same_error_with_other_numbers():
    sig = Signature.of(Verdict("crash", "KeyError", "'buf12'"))
    pat = error_pattern(sig, None)
    assert re.search(pat, "KeyError: 'buf3'") and not re.search(pat, "KeyError: 'x'")


def test_per_output_verdicts_pair_outputs_or_give_none():
    """Localization reads one verdict per output: the overall verdict is their summary,
    and a backend that returns another number of outputs gives no per-output verdicts
    (they could not be paired with eager's)."""
    import torch.fx as fx

    from oracles.backends.eager import EagerBackend
    from oracles.evaluate import evaluate_each

    class TwoOutputs(torch.nn.Module):
        def forward(self, x):
            return x + 1, x * 2

    class DropsOne(EagerBackend):
        def compile(self, gm, inputs):
            return lambda *a: gm(*a)[:1]

    class OffSecond(EagerBackend):
        def compile(self, gm, inputs):
            return lambda *a: (gm(*a)[0], gm(*a)[1] + 0.5)

    gm = fx.symbolic_trace(TwoOutputs())
    x = torch.ones(3)
    verdict, each = evaluate_each(gm, [x], OffSecond("eager"), Tolerance())
    assert [v.kind for v in each] == ["pass", "mismatch"] and verdict.kind == "mismatch" and verdict.output == 1
    verdict, each = evaluate_each(gm, [x], DropsOne("eager"), Tolerance())
    assert each == [] and verdict.kind == "mismatch" and "2 outputs" in verdict.detail


def test_the_value_oracle_asked_names_a_verdict_whose_outputs_fail_both_ways():
    """Output 0 NaN, outputs 1 and 2 off: a NaN by default (and for --oracle nan), the worst
    mismatch, with both listed, for --oracle mismatch."""
    each = [Verdict("nan", output=0, detail="4 of 4 values"), Verdict("mismatch", output=1, max_abs=0.5),
            Verdict("mismatch", output=2, max_abs=2.0)]
    assert summarize(each).kind == "nan" and summarize(each, "nan").output == 0
    asked = summarize(each, "mismatch")
    assert (asked.kind, asked.output, asked.extra["off"]) == ("mismatch", 2, [[1, 0.5, None], [2, 2.0, None]])
    assert summarize(each[:1], "mismatch").kind == "nan"  # no mismatch: the NaN still shows
    assert compare_outputs([torch.ones(2), torch.ones(2)], [torch.full((2,), float("nan")), torch.ones(2) * 3],
                           Tolerance(asked="mismatch")).output == 1


def test_error_codes_stay_in_the_signature_and_addresses_do_not():
    """ExecuTorch's, TensorRT's and CUDA's error codes name the failure: another code is
    another bug (CHANGED), where another address or count is the same one."""
    from oracles.script_checks import error_pattern

    def sig(message: str) -> Signature:
        return Signature.of(Verdict("crash", "RuntimeError", message))

    a = "method->execute() failed with error 0x12 (program at 0x7f00ab12cd)"
    assert sig(a) == sig("method->execute() failed with error 0x12 (program at 0x55aa00)")
    assert sig(a) != sig("method->execute() failed with error 0x14 (program at 0x7f00ab12cd)")
    assert sig("Failed to load method forward, error: 0x:1") != sig("Failed to load method forward, error: 0x:2")
    assert sig("Error Code 1: Myelin (a.cpp:12)") != sig("Error Code 3: API Usage Error (a.cpp:12)")
    assert sig("Error Code 1: Myelin (a.cpp:12)") == sig("Error Code 1: Myelin (a.cpp:99)")
    pattern = error_pattern(sig(a), None)
    assert re.search(pattern, "method->execute() failed with error 0x12 (program at 0xdead)")
    assert not re.search(pattern, "method->execute() failed with error 0x14 (program at 0xdead)")


def test_the_cause_a_compiler_logged_behind_a_bare_code_is_part_of_the_signature():
    """ExecuTorch raises "Failed to load method forward, error: 0x:1" for any delegate init
    failure; its log says which. Another logged cause is another bug, other numbers in the
    same one are not, and a candidate that fails without logging it is not the same."""
    from oracles.backends.executorch import ExecuTorchBackend

    log = ("[cpuinfo_utils.cpp:71] Reading file /sys/devices/soc0/image_version\n"  # a first run's probes: noise
           "[cpuinfo_utils.cpp:87] Failed to open midr file /sys/devices/soc0/image_version\n"
           "W1205 some warning\n[XNNCompiler.cpp:664] Failed to define tensor 0 with code: "
           "xnn_status_unsupported_parameter\n[method.cpp:128] Init failed for backend XnnpackBackend: 0x1\n"
           "[method.cpp:1490] arg 0 with type id 1\n"  # of its form, but no failure's words
           "[method.cpp:128] Init failed for backend XnnpackBackend: 0x1\n")
    native = ExecuTorchBackend("executorch:xnnpack").native_errors(log)
    assert native == ["[XNNCompiler.cpp:664] Failed to define tensor 0 with code: xnn_status_unsupported_parameter",
                      "[method.cpp:128] Init failed for backend XnnpackBackend: 0x1"]  # its lines, once each

    def crash(*logged: str) -> Verdict:
        return Verdict("crash", "RuntimeError", "Failed to load method forward, error: 0x:1",
                       extra={"native_errors": list(logged)} if logged else {})

    sig = Signature.of(crash(native[0]))
    assert "(logged: [XNNCompiler.cpp:<n>] Failed to define tensor <n> with code: " in sig.text()
    assert sig.matches(crash("[XNNCompiler.cpp:670] Failed to define tensor 3 with code: "
                             "xnn_status_unsupported_parameter"))
    assert not sig.matches(crash("[XNNCompiler.cpp:664] Failed to define tensor 0 with code: xnn_status_invalid_state"))
    assert not sig.matches(crash())
    assert Signature.of(crash()).matches(crash()) and Signature.of(crash()).text().endswith("0x:1")


def test_another_error_code_makes_the_repro_say_changed(tmp_path):
    """End to end: a repro of error 0x12 says REPRODUCED while the runtime fails so, and
    CHANGED (exit 3) once it fails with error 0x14."""
    import torch

    from tests.conftest import Host, plugin, save_program
    from tests.helpers import run_cli, run_repro

    torch.manual_seed(0)
    model, inputs = save_program(Host().eval(), (torch.randn(4, 8),), tmp_path)
    out = tmp_path / "out"
    r = run_cli("reduce", str(model), "--inputs", str(inputs), "--oracle", "crash", "--backend",
                plugin("error_code_on_tanh"), "--out", str(out), "--no-verify", "--no-generate-values")
    assert r.returncode == 0, r.stderr[-2000:]
    same = run_repro(out)
    assert same.returncode == 1 and "error 0x12" in same.stdout, same.stdout + same.stderr[-1000:]
    import os
    os.environ["PLANTED_ERROR_CODE"] = "0x14"
    try:
        other = run_repro(out)
    finally:
        del os.environ["PLANTED_ERROR_CODE"]
    assert other.returncode == 3 and other.stdout.startswith("CHANGED") and "0x14" in other.stdout, other.stdout


def test_a_pass_managers_wrapper_is_judged_by_the_passs_own_error(tmp_path):
    """torch.fx's and ExecuTorch's pass managers raise a bare Exception naming the pass, from
    the pass's error. The verdict ends with that error, so another error in the same pass is
    CHANGED, not the same bug; and a message-less one (a bare `assert`) still matches in
    repro.py, which words it as trtmin does ("AssertionError()"), where it said CHANGED."""
    from tests.conftest import Host, plugin, save_program
    from tests.helpers import run_cli, run_repro

    torch.manual_seed(0)
    model, inputs = save_program(Host().eval(), (torch.randn(4, 8),), tmp_path)
    out = tmp_path / "out"
    r = run_cli("reduce", str(model), "--inputs", str(inputs), "--oracle", "crash", "--backend",
                plugin("pass_fails_on_tanh"), "--out", str(out), "--no-verify", "--no-generate-values")
    assert r.returncode == 0, r.stderr[-2000:]
    assert "'PlantedPass' pass after the following passes: []: AssertionError: AssertionError()" in r.stderr, r.stderr
    same = run_repro(out)
    assert same.returncode == 1 and same.stdout.startswith("REPRODUCED"), same.stdout + same.stderr[-1000:]
    import os
    os.environ["PLANTED_PASS_ERROR"] = "ValueError"
    try:
        other = run_repro(out)
    finally:
        del os.environ["PLANTED_PASS_ERROR"]
    assert other.returncode == 3 and other.stdout.startswith("CHANGED"), other.stdout


def test_localization_reads_a_complex_value_returned_as_its_real_view():
    """Torch-TensorRT returns a complex value as its real view (..., 2): localization, which
    makes every value an output, called view_as_complex 'off (shape (1, 4, 98, 8, 2), eager
    (1, 4, 98, 8))' on the video policy and searched from there. A form is not an error;
    a different value in that form still is."""
    import torch

    from oracles.backends.base import Backend
    from oracles.evaluate import evaluate_each

    class RealViews(Backend):
        def __init__(self, scale: float) -> None:
            super().__init__("real_views")
            self.scale = scale

        def compile(self, gm, example_inputs):
            def run(*args):
                return [torch.view_as_real(v * self.scale) if v.is_complex() else v for v in gm(*args)]
            return run

    class Rope(torch.nn.Module):
        def forward(self, x, f):
            c = torch.view_as_complex(x) * f
            return c, torch.view_as_real(c).sum(-1)

    x, f = torch.randn(3, 4, 2), torch.polar(torch.ones(3, 4), torch.randn(3, 4))
    gm = torch.export.export(Rope(), (x, f)).module()
    verdict, each = evaluate_each(gm, [x, f], RealViews(1.0), Tolerance())
    assert verdict.kind == "pass" and [v.kind for v in each] == ["pass", "pass"], each
    verdict, each = evaluate_each(gm, [x, f], RealViews(2.0), Tolerance())
    assert [v.kind for v in each] == ["mismatch", "pass"] and "shape" not in each[0].detail, each


def test_a_mismatch_carries_its_first_values_off_for_the_report():
    """The int32 overflow of the shipped example, as report.md shows it: eager's values beside
    the backend's, with their indices."""
    import torch

    from minimize.emit.report import _values_section

    eager = torch.arange(24, dtype=torch.int64).reshape(3, 8) * 1_000_000_000
    wrapped = (torch.arange(24, dtype=torch.int32).reshape(3, 8) * 1_000_000_000).to(torch.int64)
    v = compare_outputs([eager], [wrapped], Tolerance())
    off = v.extra["first_off"]
    assert off["index"][:2] == [[0, 3], [0, 4]] and off["eager"][0] == 3000000000 and off["backend"][0] == -1294967296
    assert "| (0, 3) | 3000000000 | -1294967296 |" in _values_section(v)
    assert _values_section(compare_outputs([eager], [eager], Tolerance())) == ""


def test_the_first_values_off_are_written_to_their_dtypes_precision():
    """A float32 value is read back as a double with digits float32 never held
    (-0.8438374996185303 for -0.8438375): the report gives the fewest digits that are the
    same value in its dtype, and float64's as they are."""
    import torch

    from minimize.emit.report import _values_section

    for dtype, shown in ((torch.float32, "| 0 | 0.1 | -0.8438375 |"), (torch.float16, "| 0 | 0.1 | -0.8438 |"),
                         (torch.bfloat16, "| 0 | 0.1 | -0.844 |"), (torch.float64, "| 0 | 0.1 | -0.8438375 |")):
        v = compare_outputs([torch.tensor([0.1], dtype=dtype)], [torch.tensor([-0.8438375], dtype=dtype)],
                            Tolerance())
        assert shown in _values_section(v), (dtype, _values_section(v))
        for side, x in (("eager", 0.1), ("backend", -0.8438375)):  # the same value, in fewer digits
            assert torch.tensor(v.extra["first_off"][side], dtype=dtype).item() == torch.tensor(x, dtype=dtype).item()
    from oracles.checks import shortest  # not a decimal halfway to the next value: 100 would read back as 96
    assert (shortest(96.0, torch.float8_e4m3fn), shortest(32.0, torch.float8_e5m2)) == (96.0, 32.0)


def test_one_judge_answers_whether_a_verdict_is_the_failure_asked_about():
    """check, reduce and every candidate (Signature.matches) judge through oracles.verdict.answers."""
    from oracles.verdict import Signature, Verdict, answers
    crash = Verdict("crash", "RuntimeError", "no converter for aten::sin")
    assert answers(crash, "crash") and not answers(crash, "mismatch")
    assert answers(crash, "crash", "converter") and not answers(crash, "crash", "^ValueError")
    assert answers(Verdict("nan", output=0), "nan", "ignored: a NaN has no message")
    assert answers(crash, "mismatch", any_failure=True) and not answers(Verdict("pass"), "crash", any_failure=True)
    sig = Signature.of(crash)
    assert sig.matches(crash) and not sig.matches(crash, re.compile("^ValueError"))
    assert not sig.matches(Verdict("crash", "RuntimeError", "another error"))


def test_a_crash_line_cut_at_300_characters_says_it_was_cut():
    """A long error (TensorRT's Myelin lines run to 400 characters) ends in '...' where the
    verdict line cuts it, so a reader knows there is more; a short one is whole."""
    from oracles.verdict import Verdict
    long = Verdict("crash", "RuntimeError", "x" * 301 + "\nsecond line")
    assert long.describe() == "CRASH: RuntimeError: " + "x" * 300 + "..."
    assert Verdict("crash", "RuntimeError", "x" * 300).describe().endswith("x" * 300)


def test_a_mismatch_of_rounding_size_says_so():
    """Tolerances set below rounding (--atol 0 --rtol 0) made one float32 step of a conv a
    confident MISMATCH, reduced to a 1-node "bug" with no word; the note now says the
    difference is rounding's size. A real error, an integer output, or a bf16 output
    against eager (whose own note says --reference float64) get no such note."""
    from oracles.verdict import precision_note

    tight = Tolerance(atol=0.0, rtol=0.0)
    e = torch.tensor([1.1, -0.5, 0.25])
    one_step = e.clone()
    one_step[0] = torch.nextafter(e[0], torch.tensor(2.0))
    v = compare_outputs([e], [one_step], tight)
    assert v.kind == "mismatch" and "steps of float32 at the output's scale" in precision_note(v, "eager"), v
    assert "steps of float32" in precision_note(v, "float64")
    real = compare_outputs([e], [e + torch.tensor([1e-3, 0.0, 0.0])], tight)
    assert real.kind == "mismatch" and precision_note(real, "eager") is None
    ints = torch.tensor([1, 2, 3])
    assert precision_note(compare_outputs([ints], [ints + 1], tight), "eager") is None
    bf16 = compare_outputs([e.bfloat16()], [(e + 0.01).bfloat16()], Tolerance())
    assert precision_note(bf16, "eager").startswith("the mismatch is in a bfloat16 output")
    assert precision_note(bf16, "float64") is None  # judged by its error from the float64 run instead


def test_a_c_compiler_inductor_cannot_find_is_the_set_ups_mistake():
    """--set cpp.cxx naming no compiler (or a machine without g++) made every candidate fail
    with InvalidCxxCompiler, and the reduction wrote a 1-node "bug" of it. It is refused."""
    from oracles.backends.inductor import InductorBackend
    from oracles.evaluate import evaluate
    from tests.test_backends_trt_family import candidate

    class Sin(torch.nn.Module):
        def forward(self, x):
            return torch.sin(x) * 2

    backend = InductorBackend("inductor", {"cpp.cxx": "no_such_cc"})
    v = evaluate(*candidate(Sin().eval(), (torch.randn(4, 4),)), backend, Tolerance())
    assert v.kind == "crash" and v.exc_type == "InvalidCxxCompiler", v
    said = backend.setup_problem(v.message)
    assert said and said.startswith("Inductor cannot compile here (No working C++ compiler found"), said
    assert InductorBackend("inductor", {}).setup_problem("CppCompileError: C++ compile error") is None  # a bug


def test_a_lost_nan_is_said_as_such_not_as_an_infinite_difference():
    """Eager's NaN coming back finite (an op that drops NaN: ONNX Runtime's ReduceMax) read
    "differs from eager by max abs inf (max rel nan)", like an overflow."""
    eager = torch.tensor([[1.0, float("nan")], [3.0, 2.0]])
    v = compare_outputs([eager], [torch.tensor([[1.0, 0.5], [3.0, 2.0]])], Tolerance(1e-3, 1e-3))
    assert v.describe() == "MISMATCH: output 0 is finite where eager's is NaN (1 of 4 values off, dtype float32)"
    both = compare_outputs([eager], [torch.tensor([[1.0, 0.5], [3.0, 9.0]])], Tolerance(1e-3, 1e-3))
    assert both.describe().startswith("MISMATCH: output 0 is finite at 1 value where eager's is NaN, and off at others")
    inf = compare_outputs([torch.tensor([float("inf")])], [torch.tensor([7.0])], Tolerance(1e-3, 1e-3))
    assert "is finite where eager's is inf" in inf.describe() and "nan" not in inf.describe()
    # the title says it too (a maintainer's hunt: "onnxruntime mismatch on cpu: amax.default")
    from minimize.reduce import _kind_words
    assert (_kind_words(v, "cpu"), _kind_words(inf, "cuda")) == ("mismatch on cpu, NaN lost", "mismatch on cuda, inf lost")
    assert _kind_words(compare_outputs([eager], [eager * 2], Tolerance(1e-3, 1e-3)), "cpu") == "mismatch on cpu"


def test_the_scripts_verdict_names_the_worst_value_off_with_both_values():
    """repro.py's REPRODUCED line says where and what: the worst value's index, eager's
    value and the backend's, on every dtype (0-d, complex, a lost NaN)."""
    ns = {"torch": torch, "ATOL": 1e-3, "RTOL": 1e-3}
    exec(check_source(Signature("mismatch")), ns)  # noqa: S102 - the function as repro.py holds it
    verdict, why = ns["outcome"]([torch.tensor([[1.0, float("nan")], [3.0, 2.0]])],
                                 [torch.tensor([[1.0, 0.5], [3.0, 2.0]])])
    assert (verdict, why) == ("REPRODUCED", "output 0 differs from eager by max abs inf (1 of 4 values off; at [0, 1]: "
                                            "eager nan, backend 0.5)")
    _, why = ns["outcome"]([torch.tensor([0.0, 5.0, 1.0])], [torch.tensor([0.0, 5.0, 4.0])])
    assert why.endswith("(1 of 3 values off; at [2]: eager 1, backend 4)"), why
    _, why = ns["outcome"]([torch.tensor([1 + 2j])], [torch.tensor([1 + 3j])])
    assert why.endswith("at [0]: eager 1+2j, backend 1+3j)"), why
    assert ns["outcome"]([torch.tensor(2.0)], [torch.tensor(2.0)])[0] == "FIXED"
    # a NaN where eager is finite: trtmin's NaN bug (CHANGED), unless another output is off, which
    # trtmin's --oracle mismatch then names (a review: repro.py said CHANGED, trtmin REPRODUCED)
    ones, nan = torch.ones(2), torch.full((2,), float("nan"))
    assert ns["outcome"]([ones, ones], [nan, ones])[0] == "CHANGED: fails differently now"
    assert ns["outcome"]([ones, ones], [nan, ones * 3]) == (
        "REPRODUCED", "output 1 differs from eager by max abs 2 (2 of 2 values off; at [0]: eager 1, backend 3)")


def test_a_nan_eager_makes_too_is_said_as_the_programs_on_a_pass():
    """A NaN the backend returns where eager returns one too passes the nan oracle, and
    says why: a user checking a fully masked softmax row read "matches eager" alone."""
    e = torch.tensor([1.0, float("nan"), 2.0])
    v = compare_outputs([e], [e.clone()], Tolerance(1e-3, 1e-3))
    assert v.kind == "pass" and v.detail == ("output 0 has NaN where eager has too (1 of 3 values): the program "
                                             "makes them, not the backend"), v
    finite = compare_outputs([torch.ones(3)], [torch.ones(3)], Tolerance(1e-3, 1e-3))
    assert finite.kind == "pass" and not finite.detail


def test_a_nan_against_an_inf_is_off_by_inf_in_the_check_and_in_the_script():
    """ONNX Runtime's float division gave inf and -inf where eager's gave NaN: |nan - inf| is
    NaN, below no tolerance, and `check` said "does not fail ... NaN where eager has too";
    repro.py said an inf lost as "max abs 1.798e+308" (nan_to_num's default for inf)."""
    eager = torch.tensor([2.0, float("nan"), float("nan"), 5.0])
    backend = torch.tensor([2.0, float("inf"), float("-inf"), 5.0])
    for e, a in ((eager, backend), (backend, eager)):
        v = compare_outputs([e], [a], Tolerance(1e-3, 1e-3))
        assert v.kind == "mismatch" and v.max_abs == float("inf") and v.detail.startswith("2 of 4 values off"), v
    ns = {"torch": torch, "ATOL": 1e-3, "RTOL": 1e-3}
    exec(check_source(Signature("mismatch")), ns)  # noqa: S102 - the function as repro.py holds it
    verdict, why = ns["outcome"]([eager], [backend])
    assert verdict == "REPRODUCED" and why.startswith("output 0 differs from eager by max abs inf (2 of 4"), why
    _, why = ns["outcome"]([torch.tensor([float("inf"), 1.0])], [torch.tensor([3.4e38, 1.0])])
    assert why.startswith("output 0 differs from eager by max abs inf (1 of 2 values off; at [0]: eager inf"), why


def test_integers_are_compared_exactly_past_float64s_53_bits():
    """A nanosecond timestamp (1.7e18) off by one: float64 holds 2**53 exactly, so both
    trtmin's check and repro.py's called 2**60 + 1 equal to 2**60 (a lost off-by-one)."""
    stamp = torch.tensor([2**60 + 1, 5])
    v = compare_outputs([stamp], [stamp - torch.tensor([1, 0])], Tolerance(1e-3, 1e-3))
    assert v.kind == "mismatch" and v.max_abs == 1.0 and v.detail.startswith("1 of 2 values off"), v
    assert compare_outputs([stamp], [stamp.clone()], Tolerance(1e-3, 1e-3)).kind == "pass"
    ns = {"torch": torch, "ATOL": 1e-3, "RTOL": 1e-3}
    exec(check_source(Signature("mismatch")), ns)  # noqa: S102 - the function as repro.py holds it
    verdict, why = ns["outcome"]([stamp], [stamp - torch.tensor([1, 0])])
    assert verdict == "REPRODUCED" and why.startswith("output 0 differs from eager by max abs 1 (1 of 2 values off"), why
    assert ns["outcome"]([stamp], [stamp.clone()])[0] == "FIXED"
    # a difference past int64's range, a float where eager's is an integer, a NaN under
    # --rtol 0: each is off, to trtmin and to repro.py alike (a reviewer's cases)
    tight = {**ns, "RTOL": 0.0}
    exec(check_source(Signature("mismatch")), tight)  # noqa: S102
    cases = [([0], [-2**63]), ([2**62], [-2**62]), ([2**63 - 1], [-2**63]), ([3], [3.7]), ([float("nan"), 1.0], [0.0, 1.0])]
    for eager, backend in cases:
        e, a = torch.tensor(eager), torch.tensor(backend)
        assert compare_outputs([e], [a], Tolerance(1e-3, 0.0)).kind == "mismatch", (eager, backend)
        assert tight["outcome"]([e], [a])[0] == "REPRODUCED", (eager, backend)
    _, why = tight["outcome"]([torch.tensor([2**63 - 1])], [torch.tensor([-2**63])])
    assert "max abs 1.845e+19" in why, why


def test_any_failure_is_a_failure_of_the_backend_never_a_broken_cut():
    """--any-failure takes any failure; a candidate on which eager itself fails ("invalid":
    a cut that broke the program) is no failure of the backend, nor is a pass."""
    crash = Verdict("crash", "RuntimeError", "no converter for aten::sin")
    broken = Verdict("invalid", "RuntimeError", "eager fails on this candidate")
    assert answers(crash, "mismatch", any_failure=True) and not Signature.of(crash).matches(broken)
    assert not answers(broken, "crash", any_failure=True) and not answers(Verdict("pass"), "crash", any_failure=True)
    assert not Signature.of(crash).matches(broken, any_failure=True)


def test_a_mismatch_may_shrink_three_decades_and_stay_the_same_bug_not_four():
    sig = Signature.of(Verdict("mismatch", max_abs=2.0))
    assert sig.matches(Verdict("mismatch", max_abs=1e-3))  # 2.0's decade is 0: -3 is as far as it goes
    assert not sig.matches(Verdict("mismatch", max_abs=9e-4))


def test_a_mismatch_counts_only_in_the_outputs_the_reduction_follows():
    """compare_outputs lists every output off; the signature, told which outputs may show
    the bug, looks at those alone: a large error elsewhere is not it, a small one there is."""
    tol = Tolerance(1e-3, 1e-3)
    v = compare_outputs([torch.zeros(3), torch.zeros(3, dtype=torch.int64)],
                        [torch.full((3,), 0.5), torch.full((3,), 10)], tol)
    assert (v.output, v.max_abs, v.extra["off"]) == (1, 10.0, [[0, 0.5, None], [1, 10.0, None]])
    sig = Signature.of(v)
    assert sig.matches(v) and sig.matches(v, counts=lambda output: output == 1)
    assert sig.matches(v, counts=lambda output: output == 0)  # 0.5 is within 3 decades of 10
    assert not Signature.of(Verdict("mismatch", max_abs=1e4)).matches(v, counts=lambda output: output == 0)
    assert not sig.matches(v, counts=lambda output: output == 2)
    assert "off" not in compare_outputs([torch.zeros(3)], [torch.ones(3)], tol).extra  # one output: its own


def test_a_relative_error_where_eager_is_zero_is_not_said():
    """A policy hunt's title said "max rel 4.958e+11" where eager's value was 0 (the error
    over 1e-12): no relative error is said there, as torch's own assert_close says inf."""
    tol = Tolerance(1e-3, 1e-3)
    zero = compare_outputs([torch.tensor([0.0, 1.0])], [torch.tensor([0.5, 1.0])], tol)
    assert zero.max_rel == float("inf") and "max rel" not in zero.describe(), zero.describe()
    assert "(max rel 0.25)" in compare_outputs([torch.tensor([2.0, 0.0])], [torch.tensor([2.5, 0.0])], tol).describe()
    # noise within the tolerance at an eager 0 hides no real relative error (of the values off)
    noisy = compare_outputs([torch.tensor([0.0, 1.0, 2.0])], [torch.tensor([1e-9, 1.5, 2.0])], tol)
    assert "(max rel 0.5)" in noisy.describe(), noisy.describe()


def test_the_comparisons_edges():
    """oracles/checks.compare_outputs at its edges: a Python float output gets the relative
    tolerance as a tensor does; an inf where eager is finite is a NaN bug like a NaN;
    --atol 0 --rtol 0 passes equal values; of several outputs, one NaN decides over a
    mismatch elsewhere, and among mismatches the worst output."""
    tol = Tolerance(1e-3, 1e-3)
    assert compare_outputs([1e6], [1e6 + 1], tol).kind == "pass"
    assert compare_outputs([1.0], [1.5], tol).kind == "mismatch"
    inf = torch.ones(4)
    inf[2] = float("inf")
    assert compare_outputs([torch.ones(4)], [inf], tol).kind == "nan"
    e = torch.randn(3, 5)
    assert compare_outputs([e], [e.clone()], Tolerance(0.0, 0.0)).kind == "pass"
    assert compare_outputs([e], [e + 1e-6], Tolerance(0.0, 0.0)).kind == "mismatch"
    nan = torch.ones(4)
    nan[0] = float("nan")
    v = compare_outputs([torch.ones(4), torch.ones(4)], [torch.ones(4) + 5, nan], tol)
    assert (v.kind, v.output) == ("nan", 1), v
    v = compare_outputs([torch.ones(4), torch.ones(4)], [torch.ones(4) + 0.5, torch.ones(4) + 5], tol)
    assert (v.kind, v.output, v.max_abs) == ("mismatch", 1, 5.0), v


def test_the_scripts_judges_at_their_edges():
    """repro.py's own outcome (oracles/script_checks.py, as the script holds it): a NaN the
    program makes and the backend keeps is no mismatch; an inf where eager is finite is
    CHANGED for a mismatch bug, as a NaN is; the worst of several outputs is named. The
    NaN bug's judge counts only non-finite values where eager is finite."""
    ns = {"torch": torch, "ATOL": 1e-3, "RTOL": 1e-3}
    exec(check_source(Signature("mismatch")), ns)  # noqa: S102 - the function as repro.py holds it
    made_nan = torch.tensor([1.0, float("nan"), 3.0])
    assert ns["outcome"]([made_nan], [made_nan.clone()])[0] == "FIXED"
    verdict, why = ns["outcome"]([torch.ones(3)], [torch.tensor([1.0, float("inf"), 1.0])])
    assert verdict == "CHANGED: fails differently now" and "non-finite" in why, why
    _, why = ns["outcome"]([torch.ones(2), torch.ones(2)], [torch.ones(2) + 0.5, torch.ones(2) + 5])
    assert why.startswith("output 1 differs from eager by max abs 5 "), why
    nan_ns = {"torch": torch}
    exec(check_source(Signature("nan")), nan_ns)  # noqa: S102
    assert nan_ns["outcome"]([made_nan], [made_nan.clone()])[0] == "FIXED"
    assert nan_ns["outcome"]([torch.ones(3)], [made_nan])[0] == "REPRODUCED"


def test_a_full_disk_is_found_on_any_line_of_the_error():
    """Inductor's C++ compiler says "No space left on device" deep in its error: missed, the
    candidate would be journaled as another crash and the run end wrongly 1-minimal."""
    from oracles.errors import disk_full
    said = "CppCompileError: C++ compile error\n\nCommand:\ng++ /tmp/x.cpp\n/tmp/x.o: No space left on device"
    error = disk_full(said)
    assert error is not None and "a disk is full (/tmp/x.o: No space left on device)" in str(error)
    assert disk_full("CppCompileError: C++ compile error\nundefined reference") is None


def test_the_users_match_is_the_scripts_pattern_over_the_backends_own():
    """A TensorRT build failure's script has its own pattern (all TensorRT logged); where
    the user gave --match, that is the question, and repro.py asks it too."""
    from dataclasses import replace

    from minimize.emit.script import ReproInfo, script_pattern
    failed = Verdict("crash", "TensorRTError", "building the engine failed: Error Code 10: Internal Error")
    info = ReproInfo(title="t", source_model="model.pt2", original_nodes=3, final_nodes=1, oracle_calls=1,
                     oracle="crash", verdict=failed, signature=Signature.of(failed), match="Error Code 10",
                     atol=1e-3, rtol=1e-3, device="cpu", needs_subprocess=False, timeout=300.0)
    assert script_pattern(info, "the backend's own") == error_pattern(info.signature, "Error Code 10")
    assert script_pattern(replace(info, match=None), "the backend's own") == "the backend's own"


def test_a_wrapped_oom_is_an_oom_and_only_a_bare_wrapper_takes_its_causes_words():
    """Dynamo wraps the compiler's error (inner_exception): an OutOfMemoryError inside is an
    OOM even where no message says so. A cause's words join the message only behind a pass
    manager's bare Exception: a RuntimeError raised from another keeps its own words, as
    repro.py words it, or the signature would never match the script's."""
    class Wrapped(Exception):
        def __init__(self, inner: BaseException) -> None:
            super().__init__("backend compiler failed")
            self.inner_exception = inner

    v = classify_exception(Wrapped(MemoryError()))
    assert (v.kind, v.exc_type) == ("oom", "MemoryError")
    assert classify_exception(Wrapped(ValueError("bad rank"))).kind == "crash"
    from torch._dynamo.exc import InternalTorchDynamoError  # Inductor's host OOM under --memory-limit, as raised
    try:
        try:
            raise MemoryError("std::bad_alloc")
        except MemoryError as e:
            raise InternalTorchDynamoError(f"{type(e).__qualname__}: {e}") from None  # convert_frame's rewrap
    except InternalTorchDynamoError as e:
        dynamo = e
    v = classify_exception(dynamo)
    assert (v.kind, v.exc_type, v.message) == ("oom", "InternalTorchDynamoError", "MemoryError: std::bad_alloc")
    assert re.search(error_pattern(Signature("oom"), None), f"{v.exc_type}: {v.message}")  # and repro.py agrees
    try:
        raise RuntimeError("converter failed") from ValueError("bad rank")
    except RuntimeError as e:
        raised = e
    assert classify_exception(raised).message == "converter failed"
    try:
        raise Exception("An error occurred when running the 'P' pass") from ValueError("bad rank")
    except Exception as e:
        bare = e
    assert classify_exception(bare).message == "An error occurred when running the 'P' pass: ValueError: bad rank"


def test_a_number_eager_returns_is_compared_with_a_backends_one_element_tensor():
    """A backend may return eager's Python number as a one-element tensor: its value is
    compared, within the tolerance, not its type."""
    assert compare_outputs([1.0], [torch.tensor(1.0 + 1e-6, dtype=torch.float64)], Tolerance()).kind == "pass"
    assert compare_outputs([3], [torch.tensor(3)], Tolerance()).kind == "pass"
    v = compare_outputs([1.0], [torch.tensor(1.5, dtype=torch.float64)], Tolerance())
    assert (v.kind, v.max_abs, v.extra["first_off"]["eager"], v.extra["first_off"]["backend"]) == (
        "mismatch", 0.5, [1.0], [1.5])


def test_python_numbers_are_judged_as_tensors_by_trtmin_and_by_the_script():
    """An .item() output (a hunt): trtmin's check held floats to the tolerance, repro.py
    compared them exactly ("max abs inf"), so a rounding difference stayed REPRODUCED and
    two NaNs were off; both now judge a number as a 0-d tensor, with its size off."""
    tol = Tolerance(1e-3, 1e-3)
    ns = {"torch": torch, "ATOL": 1e-3, "RTOL": 1e-3}
    exec(check_source(Signature("mismatch"), numbers=True), ns)  # noqa: S102 - the function as repro.py holds it
    nan = float("nan")
    for eager, backend, kind, why in [([253773.21875], [253773.171875], "pass", "FIXED"),
                                      ([nan], [nan], "pass", "FIXED"),
                                      ([True, 2], [True, 2], "pass", "FIXED"),
                                      ([18], [8], "mismatch", "REPRODUCED"),
                                      ([0.5], [nan], "nan", "CHANGED: fails differently now")]:
        assert compare_outputs(eager, backend, tol).kind == kind, (eager, backend)
        assert ns["outcome"](eager, backend)[0] == why, (eager, backend)
    assert compare_outputs([18], [8], tol).max_abs == 10
    assert ns["outcome"]([18], [8])[1] == "output 0 differs from eager by max abs 10 (1 of 1 values off; at []: eager 18, backend 8)"
    plain = {"torch": torch, "ATOL": 1e-3, "RTOL": 1e-3}
    exec(check_source(Signature("mismatch")), plain)  # noqa: S102 - a program of tensors alone: no such line
    assert "isinstance(x, (bool, int, float))" not in check_source(Signature("mismatch"))
    nan_ns = {"torch": torch}
    exec(check_source(Signature("nan"), numbers=True), nan_ns)  # noqa: S102
    assert nan_ns["outcome"]([0.5], [nan])[0] == "REPRODUCED"


def test_a_node_whose_traceback_torch_gives_as_none_has_no_source_stack():
    """torch.fx writes `Original traceback:\\nNone` for a node with no stack: the report
    gives no source lines, not the word None."""
    from oracles.checks import failing_node

    message = ("boom\n\nWhile executing %sin : [num_users=1] = call_function[target=torch.ops.aten.sin.default]"
               "(args = (%x,), kwargs = {})\nOriginal traceback:\nNone\nUse tlparse to see full graph.")
    assert failing_node(message) == {"name": "sin", "target": "aten.sin.default", "stack": ""}


def test_a_candidate_eager_itself_cannot_run_is_invalid_not_the_compilers_crash():
    """Where eager fails on a cut (shapes that cannot be multiplied), the candidate is
    broken, not the compiler: `invalid`, which no signature takes for the bug, and the
    backend is never asked."""
    import torch.fx as fx

    from oracles.backends.eager import EagerBackend
    from oracles.evaluate import evaluate, evaluate_each

    class Compiled(EagerBackend):
        asked = 0

        def compile(self, gm, inputs):
            Compiled.asked += 1
            return gm

    class Mm(torch.nn.Module):
        def forward(self, a, b):
            return torch.mm(a, b)

    gm, inputs = fx.symbolic_trace(Mm()), [torch.randn(2, 3), torch.randn(2, 3)]
    for v in (evaluate(gm, inputs, Compiled("eager"), Tolerance()), evaluate_each(gm, inputs, Compiled("eager"),
                                                                                  Tolerance())[0]):
        assert (v.kind, v.exc_type) == ("invalid", "RuntimeError") and not v.failed
    assert Compiled.asked == 0


class _TwoHeads(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return torch.sin(x), torch.cos(x) * 2


def test_the_symptom_is_the_output_the_verdict_names_even_beside_a_shape_mismatch() -> None:
    """summarize ranks an output without a size (another shape) below one off by 10: the
    cone the reduction holds to is that output's, the one the verdict and report name."""
    from oracles.checks import Tolerance, compare_outputs
    from tests.helpers import cpu_program, reduce_with

    v = compare_outputs([torch.zeros(3), torch.zeros(3)], [torch.zeros(2), torch.full((3,), 10.0)], Tolerance())
    assert (v.output, v.extra["off"]) == (1, [[0, None, None], [1, 10.0, None]]), v
    program = cpu_program(_TwoHeads(), torch.randn(3))
    problem = reduce_with(program, lambda cand: v, passes=lambda p: p.establish_original())
    cos = next(i for i, n in enumerate(program.nodes) if "cos" in str(n.target))
    assert cos in problem.symptom_cone and not any("sin" in str(program.nodes[i].target) for i in problem.symptom_cone)


def test_only_the_backends_scratch_folders_leave_a_compilers_words():
    """without_scratch_folders drops trtmin's and the scripts' temporary folders (an 8-character
    random suffix, an absolute path), not a user's folder named alike nor a relative path."""
    from oracles.errors import without_scratch_folders as shown

    assert shown("Load model from /tmp/trtmin-state-3354-q97y4_4g/scratch/trtmin-onnx-xi44rh0q/model.onnx failed") \
        == "Load model from model.onnx failed"
    assert shown("path='/tmp/repro-onnx-ab_12xyz/model.onnx'") == "path='model.onnx'"
    for kept in ("/data/repro-trt-fp16/cfg.json", "scratch/trtmin-onnx-ab12cd34/model.onnx"):
        assert shown(kept) == kept


def test_a_union_of_types_listed_in_another_order_is_the_same_failure():
    """onnxscript lists a type union from a set, in an order each process draws anew
    (PYTHONHASHSEED): repro.py's ERROR_PATTERN, made from the workers' order, said CHANGED
    on every run alone (a TensorRT user's hunt: amax without dim, 49 -> 1 node)."""
    said = ("torch.onnx.export failed (ConversionError): ValueError: Required parameter 'dim' is not provided. "
            "Signature: aten_amax(self: TRealOrUInt8) -> (TRealOrUInt8) where TRealOrUInt8={} | BFLOAT16 |...")
    orders = [said.format("UINT8 | INT32 | INT8 | INT64"), said.format("INT64 | UINT8 | INT8 | INT32")]
    assert normalize_message(orders[0]) == normalize_message(orders[1])
    assert "TRealOrUInt<n>=<types>" in normalize_message(orders[0])
    pattern = error_pattern(Signature("crash", "OnnxExportError", normalize_message(orders[0])), None)
    assert all(re.search(pattern, text) for text in orders), pattern
    assert normalize_message("T=UINT8 | INT32") == normalize_message("T=INT32 | UINT8") == "T=<types>"
    assert normalize_message("A | B | Cat") == "<types> | Cat"  # names whole (it was "<types>at")
    # words joined by " | " are not a union: TensorRT's errors keep theirs
    assert normalize_message("node_view failed | Reshape fails | x") == "node_view<_n> failed | Reshape fails | x"


def test_a_set_of_names_in_another_order_or_with_fewer_names_is_the_same_failure():
    """ExecuTorch's "Missing out variants: {...}" lists a Python set, in an order each process
    draws anew: a quantized hunt's repro.py said REPRODUCED or CHANGED by PYTHONHASHSEED, and
    the reduction kept both ops named. A set of names is one placeholder; a dict stays."""
    said = "RuntimeError: Missing out variants: {}"
    both = ["{'quantized_decomposed::dequantize_per_tensor', 'quantized_decomposed::quantize_per_tensor'}",
            "{'quantized_decomposed::quantize_per_tensor', 'quantized_decomposed::dequantize_per_tensor'}"]
    texts = [said.format(s) for s in (*both, "{'quantized_decomposed::quantize_per_tensor'}")]
    assert {normalize_message(t) for t in texts} == {"RuntimeError: Missing out variants: <set>"}
    pattern = error_pattern(Signature("crash", "RuntimeError", normalize_message(texts[0])), None)
    assert all(re.search(pattern, t) for t in texts), pattern
    assert normalize_message('got {"a", "b"}') == "got <set>"
    assert normalize_message("KeyError: {'a': 1, 'b': 2}") == "KeyError: {'a': <n>, 'b': <n>}"


def test_a_parser_error_naming_the_operator_matches_whatever_the_node_is_named():
    """TensorRT's ONNX parser names the node and its operator; torch.onnx names the node
    after the fx node (node_view) or the ONNX op it made (node_Reshape_21), as a cut changes
    the graph around it. A 10-D reshape stopped at 2 nodes, its one-node candidate "another
    bug" (a TensorRT user's hunt). The operator still counts, and where TensorRT names no
    operator (a builder's "node_NonZero has no runners") the name's stem does."""
    said = ("the ONNX parser failed: In node {} with name: {} and operator: {} (parseNode): INVALID_NODE: Invalid "
            "Node - {} | IShuffleLayer::setReshapeDimensions: Error Code 3: API Usage Error (Number of dimensions "
            "(10) is not in the valid range [-1, Dims::MAX_DIMS]. In replicaSymbolicDims at /_src/network.cpp:306)")
    two_nodes, one_node = said.format(1, "node_Reshape_27", "Reshape", "node_Reshape_27"), \
        said.format(0, "node_view", "Reshape", "node_view")
    sig = Signature.of(Verdict("crash", "TensorRTError", two_nodes))
    assert sig.matches(Verdict("crash", "TensorRTError", one_node)), normalize_message(one_node)
    pattern = error_pattern(sig, None)
    assert re.search(pattern, one_node) and re.search(pattern, two_nodes), pattern
    other_op = said.format(0, "node_view", "Transpose", "node_view")
    assert not sig.matches(Verdict("crash", "TensorRTError", other_op))
    runners = Signature.of(Verdict("crash", "TensorRTError", "node_NonZero_0 has no runners that implement it"))
    assert runners.matches(Verdict("crash", "TensorRTError", "node_NonZero_3 has no runners that implement it"))
    assert not runners.matches(Verdict("crash", "TensorRTError", "node_TopK_0 has no runners that implement it"))


def test_onnx_runtimes_words_naming_the_operator_match_whatever_the_node_is_named():
    """ONNX Runtime names the operator beside the node, in its checker's words and its run's:
    torch.onnx's node_conv2d (a bf16 Conv alone) and node_Conv_8 (folded from a batch norm)
    are one bug, and a bf16 Conv stopped at 2 nodes (a maintainer's hunt). A dtype's width
    is no count: int8 and int64 are two bugs, and the script's pattern keeps the width."""
    checker = ("[ONNXRuntimeError] : 10 : INVALID_GRAPH : Load model from model.onnx failed:This is an invalid model. "
               "Type Error: Type 'tensor({})' of input parameter ({}) of operator (Conv) in node ({}) is invalid.")
    sig = Signature.of(Verdict("crash", "InvalidGraph", checker.format("bfloat16", "img", "node_Conv_8")))
    assert sig.matches(Verdict("crash", "InvalidGraph", checker.format("bfloat16", "x", "node_conv2d")))
    assert not sig.matches(Verdict("crash", "InvalidGraph", checker.format("float16", "x", "node_conv2d")))
    assert re.search(error_pattern(sig, None), checker.format("bfloat16", "x", "node_conv2d"))
    run = "Non-zero status code returned while running {} node. Name:'{}' Status Message: bad shape"
    sig = Signature.of(Verdict("crash", "Fail", run.format("Conv", "node_Conv_3")))
    assert sig.matches(Verdict("crash", "Fail", run.format("Conv", "node_convolution")))
    assert not sig.matches(Verdict("crash", "Fail", run.format("Gemm", "node_convolution")))
    widths = Signature.of(Verdict("crash", "TypeError", "unsupported tensor(int8) at 12"))
    assert widths.matches(Verdict("crash", "TypeError", "unsupported tensor(int8) at 13"))
    assert not widths.matches(Verdict("crash", "TypeError", "unsupported tensor(int64) at 12"))
    assert re.search(error_pattern(widths, None), "unsupported tensor(int8) at 99")
    assert not re.search(error_pattern(widths, None), "unsupported tensor(int16) at 99")
    # its kernels' words too, the most common refusal of a bf16 program (a review)
    kernel = "[ONNXRuntimeError] : 9 : NOT_IMPLEMENTED : Could not find an implementation for Mish(18) node with name '{}'"
    assert Signature.of(Verdict("crash", "NotImplemented", kernel.format("node_Mish_0"))).matches(
        Verdict("crash", "NotImplemented", kernel.format("node_mish")))
    # a dtype kept where it stands, not the first same text: in a folder's name, a quantized type's (a review)
    library = "Failed to load library {}/lib/libnvinfer_plugin.so.10: undefined symbol"
    sig = Signature.of(Verdict("crash", "OSError", library.format("/home/alice/envs/trt-fp16")))
    assert re.search(error_pattern(sig, None), library.format("/opt/ci/venv")), error_pattern(sig, None)
    assert normalize_message("expected torch.qint8 but got int8 at 12") == "expected torch.qint<n> but got int8 at <n>"
