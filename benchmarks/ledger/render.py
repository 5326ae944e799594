"""docs/validation.md from the ledger's scores (scores.json) and its hand-written template: the per-case table, the
per-kind summary and each case's rows. Generated: edit the template or the cases, then run
`python benchmarks/ledger/ledger.py score`."""

from __future__ import annotations

import statistics

MARK = "<!-- ledger scores: generated below by benchmarks/ledger/ledger.py; do not edit by hand -->"
NEAR_DOUBLINGS = 2.0     # "within 2 doublings of the measured cells"
PROBABILITIES = ("P(converge)", "P(late)")   # rows whose error is in points and whose verdict is not an interval


def pct(value: float | None) -> str:
    return "–" if value is None else f"{value:.1f}%"


def fig(value: float | None) -> str:
    if value is None:
        return "–"
    size = abs(value)
    return f"{value:,.0f}" if size >= 100 else f"{value:.1f}" if size >= 10 else f"{value:.3g}"


def short(commit: str | list[str] | None) -> str:
    if isinstance(commit, list):
        return ", ".join(short(c) for c in commit)
    return f"`{commit[:9]}`" if commit else "–"


def _ok_rows(rows: list[dict]) -> list[dict]:
    return [r for r in rows if r["what"] not in PROBABILITIES]


def summary_line(rows: list[dict]) -> tuple[str, str, str, str]:
    """(rows, median |error|, max |error|, inside) over rows with a value (convergence rows: verdicts)."""
    errors = [abs(r["error_pct"]) for r in _ok_rows(rows) if r["error_pct"] is not None]
    judged = [r for r in rows if r["what"] in PROBABILITIES or (r["low"] is not None and r["high"] is not None)]
    inside = f"{sum(r['inside'] for r in judged)}/{len(judged)}" if judged else "–"
    return (str(len(rows)), pct(statistics.median(errors)) if errors else "–", pct(max(errors)) if errors else "–",
            inside)


def best_baseline(rows: list[dict]) -> str:
    """The baseline with the smallest median |error| over the rows that have it, and its figure."""
    names = sorted({k for r in rows for k in r["baselines"]})
    best = None
    for name in names:
        errs = [abs(100 * (r["baselines"][name] - r["measured"]) / r["measured"]) for r in _ok_rows(rows)
                if name in r["baselines"] and r["measured"]]
        if errs and (best is None or statistics.median(errs) < best[1]):
            best = (name, statistics.median(errs))
    return "–" if best is None else f"{best[0]} {best[1]:.1f}%"


def by_what(rows: list[dict]) -> dict[str, list[dict]]:
    """A case's rows by what they predict (samples/s, epochs, P(converge), all-reduce time), in that order."""
    order = ("epochs", "P(converge)", "P(late)", "samples/s")
    out: dict[str, list[dict]] = {}
    for r in sorted(rows, key=lambda r: order.index(r["what"]) if r["what"] in order else -1):
        out.setdefault(r["what"], []).append(r)
    return out


def case_table(cases: list[dict]) -> list[str]:
    lines = ["| case | predicts | rows | median \\|err\\| | max \\|err\\| | inside | best baseline | shaped nothing | "
             "predicted at → measured at |", "|---|---|---:|---:|---:|---:|---|---|---|"]
    for c in cases:
        if c["pending"]:
            lines.append(f"| {c['id']} | pending: predicted at {short(c['prediction_commit'])}, not yet measured "
                         "| | | | | | | |")
            continue
        shaped = "yes" if c["shaped_nothing"] else "**no**: chosen on this data"
        for i, (what, rows) in enumerate(by_what(c["committed"]["rows"]).items()):
            n, med, top, inside = summary_line(rows)
            name = f"[{c['id']}](#{c['id']})" if i == 0 else "〃"
            base = {"P(converge)": "verdicts: P ≥ ½ where most seeds converged",
                    "P(late)": "covered: the time that happened inside the predicted 5-95%"}.get(what) or \
                best_baseline(rows)
            lines.append(f"| {name} | {what} | {n} | {med} | {top} | {inside} | {base} | {shaped} | "
                         f"{short(c['prediction_commit'])} → {short(c['measurement_commit'])} |")
    return lines


def row_kind(case: dict, row: dict) -> str:
    """What a row checks: epochs and convergence as such; samples/s by the first axis it lies beyond; an all-reduce
    time by its case's kind."""
    if row["what"] == "epochs":
        return "epochs"
    if row["what"] == "P(converge)":
        return "convergence"
    if row["what"] == "P(late)":
        return "deadline"
    if row["what"] == "samples/s":
        return f"samples/s: {row['axes'][0]}"
    return case["kind"]


def kind_table(cases: list[dict]) -> list[str]:
    """Per kind of row, over the cases that shaped nothing: rows within NEAR_DOUBLINGS of the data and beyond."""
    lines = ["| checks | cases | within 2 doublings: rows, median \\|err\\|, inside | beyond: rows, median \\|err\\|, "
             "inside |", "|---|---:|---|---|"]
    groups: dict[str, tuple[set[str], list[dict]]] = {}
    for c in cases:
        if c["pending"] or not c["shaped_nothing"]:
            continue
        for r in c["committed"]["rows"]:
            ids, rows = groups.setdefault(row_kind(c, r), (set(), []))
            ids.add(c["id"])
            rows.append(r)
    for kind in sorted(groups):
        ids, rows = groups[kind]
        cells = []
        for part in ([r for r in rows if r["doublings"] <= NEAR_DOUBLINGS], [r for r in rows
                                                                              if r["doublings"] > NEAR_DOUBLINGS]):
            n, med, _, inside = summary_line(part) if part else ("0", "–", "–", "–")
            cells.append(f"{n}, {med}, {inside}")
        lines.append(f"| {kind} | {len(ids)} | {cells[0]} | {cells[1]} |")
    return lines


def rows_table(rows: list[dict]) -> list[str]:
    lines = ["| row | axes (doublings) | measured | predicted [interval] | error | inside | baselines |",
             "|---|---|---:|---|---:|---|---|"]
    for r in rows:
        interval = "" if r["low"] is None or r["high"] is None else f" [{fig(r['low'])}–{fig(r['high'])}]"
        baselines = ", ".join(f"{k} {fig(v)}" for k, v in sorted(r["baselines"].items())) or "–"
        conv = r["what"] in PROBABILITIES
        error = "–" if r["error_pct"] is None else (f"{r['error_pct']:+.0f} pt" if conv else f"{r['error_pct']:+.1f}%")
        lines.append(f"| {r['what']} {r['label']} | {', '.join(r['axes'])} ({r['doublings']:g}) | {fig(r['measured'])} "
                     f"| {fig(r['predicted'])}{interval} | {error} | {'yes' if r['inside'] else 'no'} | {baselines} |")
    return lines


def case_section(c: dict) -> list[str]:
    out = [f'<a id="{c["id"]}"></a>', f"### {c['id']}: {c['title']}", "", f"- kind: {c['kind']}; data: {c['source']}"]
    dirty = " (its checkout was marked dirty by a data file; tests/test_ledger.py checks that no code differed)"
    code = short(c["code_commit"]) + (dirty if c["code_dirty"] else "")
    out.append(f"- predicted by orch at {code}, saved in {short(c['prediction_commit'])}; measured in "
               f"{short(c['measurement_commit'])}")
    if not c["shaped_nothing"]:
        out.append("- **the model was chosen on this data**: a record of fit, not a held-out check")
    if c["note"]:
        out.append(f"- {c['note']}")
    n, med, top, inside = summary_line(c["current"]["rows"])
    out.append(f"- today's code on the same inputs (after the measurement: not a held-out check): {n} rows, median "
               f"|error| {med}, max {top}, inside {inside}")
    return [*out, "", *rows_table(c["committed"]["rows"]), ""]


def render_page(scores: dict, template: str) -> str:
    head = template.split(MARK)[0].rstrip() + "\n\n" + MARK + "\n\n"
    cases = scores["cases"]
    body = ["## Every case", "", *case_table(cases), "", "## By what was checked (cases that shaped nothing)", "",
            *kind_table(cases), "", "## The cases", ""]
    for c in cases:
        if not c["pending"]:
            body += case_section(c)
    return head + "\n".join(body).rstrip() + "\n"
