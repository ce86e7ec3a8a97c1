"""Visible-oracle solvers of the hierarchy (tree, dom) and graph families: they read only the
model-visible view, answer exactly when the view singles out one answer, abstain (None) when
it does not, and never raise on malformed input."""

from __future__ import annotations

import json
import random

import pytest

from generator.compilers.dom import compile_dom
from generator.compilers.tree import compile_tree
from generator.families import hierarchy as h
from generator.records import ExBindRecord
from composition.release import broad_plans, generate_latent
from generator.visible_oracle import graph as graph_solver
from generator.visible_oracle import hierarchy as hierarchy_solver
from generator.visible_oracle import visible_answer, visible_view
from generator.visible_oracle.template_match import template_pattern


def _row(case, latent_id="hier_t_0003"):
    return ExBindRecord(case=case, latent_id=latent_id, suite="targeted").to_row()


@pytest.fixture(scope="module")
def latent():
    """A fixed depth-3 latent (three stages; the target is the first block of stage 3), spelled
    out so the solver tests do not depend on how the sampler draws shapes."""
    return h.HierarchyLatent(
        latent_id="hier_t_0003", condition="depth_3", levels=("module", "stage", "block"),
        module_names=("Module Onyx", "Module Falcon"), block_paths=((1, 1), (1, 2), (2, 1), (3, 1)),
        block_names=("divider", "encoder", "limiter", "parser"), target_module=1, target_path=(3, 1),
        target_kind="port", target_role="output", template_index=1)


@pytest.fixture(scope="module")
def graph_row():
    plan = next(p for p in broad_plans() if p.family == "graph" and p.slot == 0)
    return generate_latent(plan).records[0].to_row()


def _with(row, **changes):
    out = dict(row)
    if "source" in changes:
        out["observation"] = {**row["observation"], "source": changes.pop("source")}
    out.update(changes)
    return out


def test_tree_and_dom_answers_equal_gold(latent):
    tree, dom = compile_tree(latent, random.Random(11)), compile_dom(latent, random.Random(12))
    assert visible_answer(_row(tree)) == tree.gold() == {"target_id": "n_ef56"}
    assert visible_answer(_row(dom)) == dom.gold() == {"dom_id": "d_81d8"}


def test_view_carries_no_latent_field(latent):
    view = visible_view(_row(compile_tree(latent, random.Random(11))))
    assert set(view) == {"format", "instruction", "prompt", "candidates", "output_schema", "source", "suite"}
    assert all({k for k, v in c.items() if v is not None} == {"candidate_id", "candidate_type"}
               for c in view["candidates"])


def test_parsers_rebuild_the_nesting(latent):
    tree = hierarchy_solver.parse_tree_outline(compile_tree(latent, random.Random(11)).source)
    dom = hierarchy_solver.parse_dom(compile_dom(latent, random.Random(12)).source)
    for roots in (tree, dom):
        modules = [n for n in hierarchy_solver._walk(roots) if n.kind == "module"]
        assert [m.name for m in modules] == ["Module Onyx", "Module Falcon"]
        assert [len(m.children) for m in modules] == [3, 3]  # three stages per module
        stage3 = modules[0].children[2]
        block = stage3.children[0]
        assert (block.kind, block.name) == ("block", "parser")
        labels = (None, None) if roots is tree else ("in", "out")  # the DOM shows a port label
        assert [(c.kind, c.role, c.name) for c in block.children[:2]] == [
            ("port", "input", labels[0]), ("port", "output", labels[1])]
        assert (block.children[2].kind, block.children[2].name) == ("param", "syntax")


def test_hierarchy_abstains_when_the_view_does_not_decide(latent):
    tree = compile_tree(latent, random.Random(11))
    row = _row(tree)
    # two modules with the same visible name: the group is ambiguous
    twin = row["observation"]["source"].replace('module "Module Falcon"', 'module "Module Onyx"')
    assert visible_answer(_with(row, source=twin)) is None
    # an ordinal beyond what the module holds (stage 3 has one block)
    assert visible_answer(_with(row, instruction=row["instruction"].replace("first block", "second block"))) is None
    # an instruction that no public template produces
    assert visible_answer(_with(row, instruction="Pick the output port of the first block.")) is None
    # the answer must be a candidate row
    gold = tree.gold()["target_id"]
    assert visible_answer(_with(row, candidates=[c for c in row["candidates"] if c["candidate_id"] != gold])) is None
    # a depth-2 reading of a depth-3 outline resolves nothing
    assert visible_answer(_with(row, instruction="In Module Onyx, pick the output port of block 1.")) is None


@pytest.mark.parametrize("source", ["", "not an outline", "[n_1] module", "  [n_1] stage", None, 17,
                                    "<div><span id='x' class='port'>in</div>", "<section id=a class=module>"])
def test_hierarchy_never_raises(latent, source):
    for fmt, compile_ in (("tree", compile_tree), ("dom", compile_dom)):
        row = _row(compile_(latent, random.Random(1)))
        assert visible_answer(_with(row, source=source)) is None
    assert hierarchy_solver.solve({"format": "tree", "source": "[n_1] stage"}, None) is None


def test_graph_answer_equals_gold(graph_row):
    gold = json.loads(graph_row["reference"])["gold"]
    assert set(gold) == {"source_id", "target_id"}
    assert visible_answer(graph_row) == gold


def test_graph_abstains_when_the_view_does_not_decide(graph_row):
    gold = json.loads(graph_row["reference"])["gold"]
    lines = graph_row["observation"]["source"].splitlines()
    target_edge = next(line for line in lines if line.startswith(f"{gold['source_id']} -> {gold['target_id']} "))
    # the instructed edge removed: nothing fits
    assert visible_answer(_with(graph_row, source="\n".join(x for x in lines if x != target_edge))) is None
    # a second node with the source's name and the same edge: two edges fit
    name = next(x for x in lines if x.startswith(f"node {gold['source_id']} ")).split(" ", 2)[2]
    other = next(x.split()[1] for x in lines if x.startswith("node ") and x.split()[1] not in gold.values())
    renamed = [f"node {other} {name}" if x.startswith(f"node {other} ") else x for x in lines]
    renamed.append(target_edge.replace(gold["source_id"], other, 1))
    assert visible_answer(_with(graph_row, source="\n".join(renamed))) is None
    # an edge naming an undeclared node, or a line that is neither node nor edge
    assert graph_solver.parse_graph_edges("node g_1 \"a\"\ng_1 -> g_2 [calls]") is None
    assert visible_answer(_with(graph_row, source="\n".join(lines + ["garbage"]))) is None
    assert visible_answer(_with(graph_row, instruction="Select the edge.")) is None
    assert visible_answer(_with(graph_row, source=None)) is None
    assert graph_solver.solve({"source": "", "instruction": "", "output_schema": "not json"}, None) is None


def test_template_pattern_reads_placeholders_back():
    pattern = template_pattern("In {group}, pick block {block_num} of stage {stage_num}.",
                               {"group": "Module A|Module B", "block_num": "[0-9]+", "stage_num": "[0-9]+"})
    assert pattern.fullmatch("In Module B, pick block 2 of stage 1.").groupdict() == {
        "group": "Module B", "block_num": "2", "stage_num": "1"}
    assert pattern.fullmatch("In Module C, pick block 2 of stage 1.") is None
    assert template_pattern("{unknown} block", {}) is None
