"""What a reader sees for a rule that could not be judged: the registry's words, each once, not fact names."""

from __future__ import annotations

from gpudoctor.catalog.impact import needs_in_words
from gpudoctor.model import NotEvaluated, Source
from gpudoctor.report.model import Report
from gpudoctor.report.render import not_evaluated_lines


def test_fact_names_become_their_registry_words_each_once() -> None:
    # GD210 on a trace without autocast: three names from one block, one of them again from another
    needs = ("autocast_cast_pct_of_gpu, autocast_grad_cast_kernels_per_step, autocast_cast_kernels_per_step; "
             "autocast_cast_pct_of_gpu")
    words = needs_in_words(needs)
    assert "_" not in words
    assert words.count("autocast cast kernel time as a share of GPU kernel time") == 1
    assert words.split("; ")[0] == "autocast cast kernel time as a share of GPU kernel time"


def test_a_parenthesis_is_dropped_whole_and_a_comma_inside_it_does_not_cut() -> None:
    # "hand-written attention chains (bmm, scale/mask, softmax, bmm) per step in forward"
    assert needs_in_words("attention_handwritten_chains_per_step") == "hand-written attention chains per step in forward"
    assert needs_in_words("compiled_kernel_ms_per_step") == "Inductor kernel time per step"


def test_words_a_rule_file_wrote_stay_as_written() -> None:
    written = "the step counts of every rank (agent in each rank: gpudoctor run, or attach to the launcher)"
    assert needs_in_words(written) == written
    assert needs_in_words(f"{written}; mem_peak_pct") == f"{written}; peak reserved memory as a share of the GPU's memory"


def test_the_report_prints_words() -> None:
    report = Report(command="analyze", inputs=[], not_evaluated=[
        NotEvaluated("GD501", "memory-near-limit", Source.TRACE, "mem_peak_pct")])
    assert not_evaluated_lines(report) == [
        "GD501 memory-near-limit [trace]: needs peak reserved memory as a share of the GPU's memory"]
