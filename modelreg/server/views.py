"""What the dashboard pages show, computed from the API's output models: the what-runs-where
matrix, and the geometry of the inline SVG charts (numbers only — every string reaches the
page through Jinja2's autoescaping, never through markup built here)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from modelreg.schemas.output import BrowseItem, FitOutput, MatrixCell, MatrixOutput, TrendOutput
from modelreg.units import duration_ms, rate, size_bytes

CHART_WIDTH = 860
LABEL_WIDTH = 140
BAR_AREA = 300
ROW_HEIGHT = 22


@dataclass(frozen=True)
class Column:
    name: str
    origin: str
    defined: bool
    description: str = ""

    @property
    def local(self) -> bool:
        return self.origin.startswith("local:")


@dataclass
class Matrix:
    columns: list[Column]
    rows: list[tuple[str, list[MatrixCell | None]]]
    counts: dict[str, int]
    total_models: int
    first: int  # 1-based number of the first model shown
    previous_offset: int | None
    next_offset: int | None


def matrix(page: MatrixOutput) -> Matrix:
    """Models × targets → the production record and its state in one word. Targets that are
    no longer defined but still hold production records get a column too (failing)."""
    columns = [Column(t.name, t.origin, True, t.description) for t in page.targets]
    known = {c.name for c in columns}
    for cell in page.cells:
        if cell.target not in known:
            columns.append(Column(cell.target, "no longer defined", False))
            known.add(cell.target)
    cells = {(c.model_id, c.target): c for c in page.cells}
    counts = {"deployable": 0, "stale": 0, "held": 0, "failing": 0, "uncounted": 0, "unverified": 0}
    for c in page.cells:
        counts[c.now] += 1
    rows = [(m, [cells.get((m, col.name)) for col in columns]) for m in page.models]
    after = page.offset + len(page.models)
    return Matrix(
        columns,
        rows,
        counts,
        page.total_models,
        page.offset + 1,
        max(0, page.offset - page.limit) if page.offset > 0 else None,
        after if after < page.total_models else None,
    )


@dataclass(frozen=True)
class Bar:
    label: str
    value_text: str
    y: int
    width: float
    css: str


@dataclass(frozen=True)
class BarChart:
    title: str
    bars: list[Bar]
    height: int
    reference_x: float | None = None
    reference_text: str | None = None
    label_width: int = LABEL_WIDTH
    width: int = CHART_WIDTH


def _scale(value: float, maximum: float) -> float:
    return round(BAR_AREA * value / maximum, 1) if maximum > 0 else 0.0


def quantization_histogram(quantization: dict[str, Any] | None) -> BarChart | None:
    """Share of the parameters held by each tensor type, with its real bits per weight."""
    types = (quantization or {}).get("tensor_types") or {}
    total = sum(int(t.get("params") or 0) for t in types.values())
    if not types or total <= 0:
        return None
    ordered = sorted(types.items(), key=lambda kv: (-int(kv[1].get("params") or 0), kv[0]))
    bars = []
    for i, (name, stats) in enumerate(ordered):
        params = int(stats.get("params") or 0)
        bpw = stats.get("bits_per_weight")
        bpw_text = f"{bpw:.2f} bpw" if isinstance(bpw, int | float) else "bpw unknown"
        bars.append(
            Bar(
                label=str(name),
                value_text=f"{params / total:.1%} of params · {stats.get('tensors', 0)} "
                f"tensors · {bpw_text}",
                y=i * ROW_HEIGHT,
                width=_scale(params, total),
                css="bar-type",
            )
        )
    return BarChart("Tensor types (share of parameters)", bars, len(bars) * ROW_HEIGHT)


def group_bits(quantization: dict[str, Any] | None) -> BarChart | None:
    """Real bits per weight of each tensor group, against the artifact's overall figure."""
    quantization = quantization or {}
    groups = {
        name: stats
        for name, stats in (quantization.get("groups") or {}).items()
        if isinstance(stats.get("bits_per_weight"), int | float)
    }
    if not groups:
        return None
    overall = quantization.get("bits_per_weight")
    maximum = max([float(s["bits_per_weight"]) for s in groups.values()] + [float(overall or 0)])
    ordered = sorted(groups.items(), key=lambda kv: (-int(kv[1].get("params") or 0), kv[0]))
    bars = [
        Bar(
            label=str(name),
            value_text=f"{stats['bits_per_weight']:.2f} bits/weight · "
            f"{int(stats.get('params') or 0):,} params",
            y=i * ROW_HEIGHT,
            width=_scale(float(stats["bits_per_weight"]), maximum),
            css="bar-group",
        )
        for i, (name, stats) in enumerate(ordered)
    ]
    return BarChart(
        "Bits per weight by tensor group",
        bars,
        len(bars) * ROW_HEIGHT,
        reference_x=LABEL_WIDTH + _scale(float(overall), maximum) if overall else None,
        reference_text=f"overall {overall:.2f}" if overall else None,
    )


@dataclass(frozen=True)
class Segment:
    label: str
    bytes_text: str
    x: float
    width: float
    css: str


@dataclass(frozen=True)
class StackedBar:
    title: str
    segments: list[Segment]
    budget_x: float | None
    budget_text: str
    verdict: str
    width: int = CHART_WIDTH
    bar_width: int = CHART_WIDTH - 40


_SEGMENT_CSS = ("seg-a", "seg-b", "seg-c", "seg-d", "seg-e")


def _gib(n: int | None) -> str:
    return "unknown" if n is None else f"{n / (1 << 30):.2f} GiB"


def fit_bars(fit: FitOutput) -> list[StackedBar]:
    """The memory fit as stacked bars against the budget: weights + KV cache + overhead
    against the target's budget (CPU); per NeuronCore modules + reserve against the core
    budget, and host RAM against the host budget (Neuron)."""
    lines = {line.key: line for line in fit.lines}
    if fit.kind == "cpu":
        plans = [("memory", ["weights", "kv_cache", "overhead"], "budget")]
    else:
        modules = [k for k in lines if k.startswith("module:")]
        plans = [
            ("per NeuronCore", [*modules, "reserve"], "core_budget"),
            ("host RAM", ["host"], "host_budget"),
        ]
    bars = []
    for title, keys, budget_key in plans:
        parts = [(lines[k].name, lines[k].sizes.bytes) for k in keys if k in lines]
        budget = lines[budget_key].sizes.bytes if budget_key in lines else None
        known = [(name, n) for name, n in parts if n is not None]
        total = sum(n for _, n in known)
        scale_max = max(total, budget or 0)
        usable = CHART_WIDTH - 40
        x = 0.0
        segments = []
        for i, (name, n) in enumerate(known):
            width = round(usable * n / scale_max, 1) if scale_max else 0.0
            segments.append(Segment(name, _gib(n), x, width, _SEGMENT_CSS[i % len(_SEGMENT_CSS)]))
            x += width
        unknown = [name for name, n in parts if n is None]
        budget_x = round(usable * budget / scale_max, 1) if budget and scale_max else None
        text = f"budget {_gib(budget)}" + (f" · unknown: {', '.join(unknown)}" if unknown else "")
        bars.append(StackedBar(f"{fit.target}: {title}", segments, budget_x, text, fit.verdict))
    return bars


# -- trends: a record's or a model's runs over time ---------------------------------------

TREND_WIDTH = 420
TREND_HEIGHT = 90
TREND_LEFT = 56  # room for the value labels


@dataclass(frozen=True)
class Dot:
    x: float
    y: float
    css: str  # dot-pass, dot-fail
    text: str  # the tooltip: which run, its value


@dataclass(frozen=True)
class TrendChart:
    title: str
    dots: list[Dot]
    polyline: str  # "x,y x,y …": numbers only
    top_text: str
    bottom_text: str
    first_text: str
    last_text: str
    width: int = TREND_WIDTH
    height: int = TREND_HEIGHT
    left: int = TREND_LEFT


_TREND_METRICS: tuple[tuple[str, str, Callable[[float], str]], ...] = (
    ("decode_tokens_per_s", "decode speed", rate),
    ("ttft_ms", "time to first token (median)", duration_ms),
    ("peak_rss_bytes", "peak RSS", lambda v: size_bytes(round(v))),
)


def trend_charts(trend: TrendOutput) -> list[TrendChart]:
    """One small line chart per measured figure (decode tokens/s, TTFT, peak RSS) over the
    runs that measured it, oldest left; a failed run's dot is drawn as failing. A figure no
    run measured gets no chart."""
    charts = []
    for key, title, shown in _TREND_METRICS:
        measured = [(p, getattr(p, key)) for p in trend.points if getattr(p, key) is not None]
        if not measured:
            continue
        values = [float(v) for _, v in measured]
        low, high = min(values), max(values)
        span = high - low or (abs(high) or 1.0)
        plot = TREND_WIDTH - TREND_LEFT - 10
        step = plot / (len(measured) - 1) if len(measured) > 1 else 0.0
        dots = []
        for i, (point, value) in enumerate(measured):
            x = round(TREND_LEFT + (i * step if len(measured) > 1 else plot / 2), 1)
            y = round(8 + (TREND_HEIGHT - 16) * (1 - (float(value) - low) / span), 1)
            dots.append(
                Dot(
                    x,
                    y,
                    "dot-pass" if point.passed else "dot-fail",
                    f"{point.record_id} run {point.run_id[:12]} on {point.target}, "
                    f"{point.at:%Y-%m-%d %H:%M}: {shown(value)}"
                    + ("" if point.passed else " (run failed)"),
                )
            )
        charts.append(
            TrendChart(
                title=f"{title} · {len(measured)} run{'s' if len(measured) != 1 else ''}",
                dots=dots,
                polyline=" ".join(f"{d.x},{d.y}" for d in dots),
                top_text=shown(high),
                bottom_text=shown(low),
                first_text=f"{measured[0][0].at:%Y-%m-%d}",
                last_text=f"{measured[-1][0].at:%Y-%m-%d}",
            )
        )
    return charts


# -- the records of a model, sortable ------------------------------------------------------

SORT_KEYS = ("added", "state", "bits", "params", "production")


def sorted_records(items: list[BrowseItem], key: str, descending: bool) -> list[BrowseItem]:
    """The model page's table in the order asked: unknown values last either way."""

    def value(item: BrowseItem) -> Any:
        if key == "state":
            return item.record.effective_state
        if key == "bits":
            return item.bits_per_weight
        if key == "params":
            return item.total_parameters
        if key == "production":
            return len(item.production_on)
        return (item.record.created_at, item.record.record_id)

    known = [i for i in items if value(i) is not None]
    unknown = [i for i in items if value(i) is None]
    return sorted(known, key=value, reverse=descending) + unknown
