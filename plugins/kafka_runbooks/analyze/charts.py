"""The report's charts, drawn inline as SVG from what the bundle holds (issue 31): no script, no external asset. Pure.

* Under-replicated partitions over time: replayed from the brokers' own ISR changes in their logs (``isr_shrink`` /
  ``isr_expand``: "Shrinking ISR from 1,2,3 to 1,2"): a partition is under-replicated from a shrink until an expand
  gives it back the most replicas its ISR had in the bundle; the line is how many are, and the in-sync replicas they
  have between them. Only what the logs say: a partition whose ISR never changed in the bundle is not on it. (The log
  summary keeps a bounded sample of each signature's events; the chart says when some were left out.)
* GC pauses: one bar per stop-the-world pause with a wall-clock time in the GC log, its length in seconds, one colour
  per broker.

Every label is escaped (thread, topic and host names are hostile); a chart with nothing to draw is not drawn.
"""

from __future__ import annotations

import datetime as dt
import html
from typing import Any, Iterable, Mapping, Sequence

W, H, PAD_L, PAD_R, PAD_T, PAD_B = 840, 220, 56, 200, 24, 36
COLOURS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf")


def _e(v: Any) -> str:
    return html.escape("" if v is None else str(v), quote=True)


def _time(value: Any) -> dt.datetime | None:
    if isinstance(value, dt.datetime):
        t = value
    else:
        try:
            t = dt.datetime.fromisoformat(str(value).replace(",", ".").replace(" ", "T").replace("Z", "+00:00"))
        except ValueError:
            return None
    return t if t.tzinfo else t.replace(tzinfo=dt.timezone.utc)


def _ids(text: Any) -> set[str]:
    return {x.strip() for x in str(text or "").split(",") if x.strip()}


def isr_series(events: Iterable[Mapping[str, Any]]) -> list[tuple[dt.datetime, int, int]]:
    """(time, under-replicated partitions, their in-sync replicas) after each ISR change, in time order. ``events``:
    {"at", "signature" ("isr_shrink" | "isr_expand"), "topic", "partition", "from", "to"}."""
    most: dict[tuple[str, str], int] = {}
    now: dict[tuple[str, str], int] = {}
    out: list[tuple[dt.datetime, int, int]] = []
    timed = [(t, e) for e in events if (t := _time(e.get("at"))) is not None and e.get("signature") in ("isr_shrink", "isr_expand")]
    for t, e in sorted(timed, key=lambda x: x[0]):
        key = (str(e.get("topic")), str(e.get("partition")))
        before, after = _ids(e.get("from")), _ids(e.get("to"))
        most[key] = max(most.get(key, 0), len(before), len(after))
        now[key] = len(after)
        under = [k for k, n in now.items() if n < most[k]]
        out.append((t, len(under), sum(now[k] for k in under)))
    return out


def _scale(t0: dt.datetime, t1: dt.datetime, ymax: float):
    span = max((t1 - t0).total_seconds(), 0.001)
    x = lambda t: PAD_L + (W - PAD_L - PAD_R) * (t - t0).total_seconds() / span  # noqa: E731
    y = lambda v: PAD_T + (H - PAD_T - PAD_B) * (1 - v / ymax)  # noqa: E731
    return x, y


def _frame(title: str, t0: dt.datetime, t1: dt.datetime, ymax: float, y_label: str, body: Sequence[str],
           legend: Sequence[tuple[str, str]], note: str = "") -> str:
    x, y = _scale(t0, t1, ymax)
    axis = (f"<line x1='{PAD_L}' y1='{y(0):.1f}' x2='{W - PAD_R}' y2='{y(0):.1f}' stroke='#667085'/>"
            f"<line x1='{PAD_L}' y1='{PAD_T}' x2='{PAD_L}' y2='{y(0):.1f}' stroke='#667085'/>"
            f"<text x='{PAD_L - 6}' y='{y(ymax) + 4:.1f}' text-anchor='end' font-size='11'>{_e(_num(ymax))}</text>"
            f"<text x='{PAD_L - 6}' y='{y(0) + 4:.1f}' text-anchor='end' font-size='11'>0</text>"
            f"<text x='{PAD_L}' y='{H - 8}' font-size='11'>{_e(_clock(t0, t1, True))} UTC</text>"
            f"<text x='{W - PAD_R}' y='{H - 8}' text-anchor='end' font-size='11'>{_e(_clock(t0, t1, False))}</text>"
            f"<text x='12' y='{(PAD_T + H - PAD_B) / 2:.0f}' font-size='11' transform='rotate(-90 12 {(PAD_T + H - PAD_B) / 2:.0f})' "
            f"text-anchor='middle'>{_e(y_label)}</text>")
    keys = "".join(f"<rect x='{W - PAD_R + 12}' y='{PAD_T + 16 * i}' width='10' height='10' fill='{c}'/>"
                   f"<text x='{W - PAD_R + 26}' y='{PAD_T + 16 * i + 9}' font-size='11'>{_e(label)}</text>"
                   for i, (label, c) in enumerate(legend))
    return (f"<figure class='chart'><svg xmlns='http://www.w3.org/2000/svg' role='img' width='{W}' height='{H}' "
            f"viewBox='0 0 {W} {H}'><title>{_e(title)}</title>{axis}{''.join(body)}{keys}</svg>"
            f"<figcaption>{_e(title)}{(' — ' + _e(note)) if note else ''}</figcaption></figure>")


def _clock(t0: dt.datetime, t1: dt.datetime, first: bool) -> str:
    """An end of the time axis: the first with its date; milliseconds when the window is under a minute."""
    fine = (t1 - t0).total_seconds() < 60
    t = t0 if first else t1
    text = t.strftime("%Y-%m-%d %H:%M:%S" if first else "%H:%M:%S")
    return text + (f".{t.microsecond // 1000:03d}" if fine else "")


def _num(v: float) -> str:
    return f"{v:g}" if v >= 10 else f"{v:.2g}"


def isr_chart(events: Iterable[Mapping[str, Any]], omitted: int = 0) -> str:
    """A step chart of under-replicated partitions (and their in-sync replicas), or "" when no ISR changed."""
    series = isr_series(events)
    if not series:
        return ""
    t0, t1 = series[0][0], series[-1][0]
    ymax = float(max(max(n, r) for _, n, r in series) or 1)
    x, y = _scale(t0, t1 if t1 > t0 else t0 + dt.timedelta(seconds=1), ymax)
    lines = []
    for idx, colour, dash in ((2, COLOURS[0], " stroke-dasharray='6 3'"), (1, COLOURS[1], "")):  # the count on top
        pts, last = [], 0.0
        for t, *vals in series:
            pts += [f"{x(t):.1f},{y(last):.1f}", f"{x(t):.1f},{y(vals[idx - 1]):.1f}"]
            last = vals[idx - 1]
        lines.append(f"<polyline fill='none' stroke='{colour}' stroke-width='2'{dash} points='{' '.join(pts)}'/>")
    note = f"{omitted} ISR change(s) of the logs are not in the sample drawn" if omitted else ""
    return _frame("Under-replicated partitions over time (from the brokers' ISR changes)", t0,
                  t1 if t1 > t0 else t0 + dt.timedelta(seconds=1), ymax, "partitions / replicas", lines,
                  [("under-replicated partitions", COLOURS[1]), ("their in-sync replicas", COLOURS[0])], note)


def gc_chart(pauses: Iterable[Mapping[str, Any]]) -> str:
    """One bar per pause with a wall-clock time ({"at", "broker_id", "seconds", "kind"}), or "" when none has one."""
    timed = [(t, p) for p in pauses if (t := _time(p.get("at"))) is not None and p.get("seconds") is not None]
    if not timed:
        return ""
    timed.sort(key=lambda x: x[0])
    t0, t1 = timed[0][0], timed[-1][0]
    t1 = t1 if t1 > t0 else t0 + dt.timedelta(seconds=1)
    ymax = max(float(p["seconds"]) for _, p in timed) or 1.0
    x, y = _scale(t0, t1, ymax)
    brokers = sorted({str(p.get("broker_id")) for _, p in timed})
    colour = {b: COLOURS[i % len(COLOURS)] for i, b in enumerate(brokers)}
    bars = [f"<line x1='{x(t):.1f}' y1='{y(0):.1f}' x2='{x(t):.1f}' y2='{y(float(p['seconds'])):.1f}' "
            f"stroke='{colour[str(p.get('broker_id'))]}' stroke-width='3'><title>broker {_e(p.get('broker_id'))}: "
            f"{_e(p.get('kind'))} pause of {float(p['seconds']):.3f} s at {_e(p.get('at'))}</title></line>" for t, p in timed]
    return _frame("GC pauses (stop-the-world, seconds)", t0, t1, ymax, "seconds", bars,
                  [(f"broker {b}", colour[b]) for b in brokers])


def request_queue_chart(points: Iterable[Mapping[str, Any]], unanswered: Iterable[Mapping[str, Any]] = (),
                        bounds: Mapping[Any, Mapping[str, Any]] | None = None) -> str:
    """RequestQueueSize per broker over the capture's window: one polyline per broker whose JMX read answered
    (``points``: {"at", "broker_id", "value"}; a marker on every reading, one JmxTool read is one point), each broker's
    queued.max.requests as a dashed reference line when its server.properties was read (``bounds``: broker ->
    {"value", "default"}), and every broker whose read gave no answer (``unanswered``: {"broker_id", "reason"}) named
    under the chart -- never drawn as zero. "" when no broker has a reading and none is unanswered."""
    timed = sorted(((t, p) for p in points if (t := _time(p.get("at"))) is not None and p.get("value") is not None),
                   key=lambda x: x[0])
    silent = sorted({str(u.get("broker_id")): str(u.get("reason") or "no answer") for u in unanswered}.items())
    if not timed and not silent:
        return ""
    no_answer = "; ".join(f"broker {b}: no answer from its JMX read ({why}), not drawn" for b, why in silent)
    if not timed:
        return (f"<figure class='chart'><figcaption>Request queue (RequestQueueSize): no broker's JMX read answered — "
                f"{_e(no_answer)}</figcaption></figure>")
    bounds = {str(k): v for k, v in (bounds or {}).items() if v and v.get("value")}
    t0, t1 = timed[0][0], timed[-1][0]
    t1 = t1 if t1 > t0 else t0 + dt.timedelta(seconds=1)
    ymax = max([float(p["value"]) for _, p in timed] + [float(v["value"]) for v in bounds.values()]) or 1.0
    x, y = _scale(t0, t1, ymax)
    brokers = sorted({str(p.get("broker_id")) for _, p in timed})
    colour = {b: COLOURS[i % len(COLOURS)] for i, b in enumerate(brokers)}
    body = []
    for value in sorted({float(v["value"]) for v in bounds.values()}):
        who = ", ".join(f"{b}{' (default)' if v.get('default') else ''}" for b, v in sorted(bounds.items()) if float(v["value"]) == value)
        body.append(f"<line class='bound' x1='{PAD_L}' y1='{y(value):.1f}' x2='{W - PAD_R}' y2='{y(value):.1f}' "
                    f"stroke='#667085' stroke-dasharray='4 4'><title>queued.max.requests {value:g}: broker(s) {_e(who)}"
                    f"</title></line>")
    for b in brokers:
        mine = [(t, float(p["value"])) for t, p in timed if str(p.get("broker_id")) == b]
        body.append(f"<polyline fill='none' stroke='{colour[b]}' stroke-width='2' points='"
                    + " ".join(f"{x(t):.1f},{y(v):.1f}" for t, v in mine) + "'/>")
        body += [f"<circle cx='{x(t):.1f}' cy='{y(v):.1f}' r='3' fill='{colour[b]}'><title>broker {_e(b)}: "
                 f"RequestQueueSize {v:g} at {_e(t.isoformat())}</title></circle>" for t, v in mine]
    single = all(sum(1 for _, p in timed if str(p.get("broker_id")) == b) == 1 for b in brokers)
    note = "; ".join(s for s in (
        "one JmxTool read per broker (the capture reads JMX once): a point each, not a trend" if single else "",
        "dashed: queued.max.requests" if bounds else "queued.max.requests unknown (no server.properties read)",
        no_answer) if s)
    return _frame("Request queue (RequestQueueSize per broker, from the capture's JMX reads)", t0, t1, ymax, "requests",
                  body, [(f"broker {b}", colour[b]) for b in brokers], note)
