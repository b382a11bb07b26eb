"""A model's layers as groups of identical layers, so that what is computed over them (the KV
cache, its split over Neuron ranks) costs one step per distinct kind of layer — never one per
layer a manifest names. A manifest saying ``block_count: 2147483648`` once made a fit allocate
16.9 GB; a schema bound now refuses that at every door (``limits.MAX_LAYERS``), and rows stored
before the bound are read back as they are, so the arithmetic must not depend on the count.

A layer's kind is what the KV cache depends on: its query and KV heads, key and value sizes,
whether it uses the sliding window, whether it reuses an earlier layer's cache. Per-layer
lists in the manifest are read entry by entry (they are part of the input); past their end and
wherever a value is one int, layers are counted, not visited; a periodic sliding-window layout
is counted arithmetically.
"""

from __future__ import annotations

from dataclasses import dataclass

from modelreg.schemas.manifest import ArchitectureFacts

# llama.cpp's fixed sliding-window layouts when the file carries no per-layer pattern:
# every Nth layer attends globally, the others use the window.
SLIDING_WINDOW_PERIOD = {"gemma2": 2, "gemma3": 6, "cohere2": 4}


def layer_value(value: int | list[int] | None, layer: int) -> int | None:
    """The value of ``layer`` from one int for every layer or a per-layer list (None past
    the list's end)."""
    if isinstance(value, list):
        return value[layer] if layer < len(value) else None
    return value


@dataclass(frozen=True)
class SlidingLayout:
    """Which layers use the sliding window: a per-layer pattern, a period (every
    ``period``-th layer global), or none. ``known`` is False when a window is declared but the
    layout is not (every layer is then counted at full context, an upper bound)."""

    pattern: tuple[bool, ...] | None = None
    period: int | None = None
    source: str | None = None
    known: bool = True

    def sliding(self, layer: int) -> bool:
        if self.pattern is not None:
            return self.pattern[layer] if layer < len(self.pattern) else False
        if self.period is not None:
            return (layer + 1) % self.period != 0
        return False

    def sliding_between(self, start: int, stop: int) -> int:
        """How many of the layers start … stop-1 use the window (arithmetic for a period)."""
        if stop <= start:
            return 0
        if self.pattern is not None:
            return sum(self.pattern[start:stop])
        if self.period is not None:
            return (stop - start) - (stop // self.period - start // self.period)
        return 0


NO_SLIDING = SlidingLayout()


def sliding_layout(arch: ArchitectureFacts) -> SlidingLayout:
    """The sliding-window layout of ``arch`` and where it came from."""
    layers = arch.block_count
    if not arch.sliding_window or not layers or layers < 0:
        return NO_SLIDING
    if arch.sliding_window_pattern and len(arch.sliding_window_pattern) == layers:
        return SlidingLayout(
            pattern=tuple(arch.sliding_window_pattern), source="per-layer pattern in the artifact"
        )
    period = SLIDING_WINDOW_PERIOD.get(arch.architecture or "")
    if period:
        return SlidingLayout(
            period=period,
            source=f"{arch.architecture}: every {period}th layer global (llama.cpp layout)",
        )
    return SlidingLayout(known=False)


@dataclass(frozen=True)
class LayerKind:
    """What the KV cache of one layer depends on (None: not recorded for that layer)."""

    head_count: int | None
    head_count_kv: int | None
    key_length: int | None
    value_length: int | None
    sliding: bool
    kv_shared: bool  # reuses an earlier layer's cache: holds none of its own


@dataclass(frozen=True)
class LayerGroup:
    kind: LayerKind
    count: int
    first: int  # the lowest layer index of this kind (the one a message names)


def layer_groups(arch: ArchitectureFacts, layout: SlidingLayout | None = None) -> list[LayerGroup]:
    """The layers of ``arch`` grouped by kind, in the order each kind first occurs. Steps:
    the longest per-layer list (or pattern) in the manifest, plus at most four groups for the
    layers past it — whatever ``block_count`` says."""
    total = arch.block_count or 0
    if total <= 0:
        return []
    layout = layout if layout is not None else sliding_layout(arch)
    holding = total - min(max(arch.kv_shared_layers or 0, 0), total)
    per_layer = (arch.head_count, arch.head_count_kv, arch.key_length, arch.value_length)
    listed = [len(v) for v in per_layer if isinstance(v, list)]
    if layout.pattern is not None:
        listed.append(len(layout.pattern))
    head = min(total, max(listed, default=0))
    groups: dict[LayerKind, list[int]] = {}

    def add(kind: LayerKind, count: int, first: int) -> None:
        if count <= 0:
            return
        entry = groups.setdefault(kind, [0, first])
        entry[0] += count
        entry[1] = min(entry[1], first)

    def kind_of(values: tuple[int | None, ...], sliding: bool, shared: bool) -> LayerKind:
        heads, kv_heads, key, value = values
        return LayerKind(heads, kv_heads, key, value, sliding, shared)

    for layer in range(head):
        values = tuple(layer_value(v, layer) for v in per_layer)
        add(kind_of(values, layout.sliding(layer), layer >= holding), 1, layer)
    # Past every list: one value per attribute (an int, or None past a list's end).
    rest = tuple(None if isinstance(v, list) else v for v in per_layer)
    for start, stop, shared in ((head, holding, False), (max(head, holding), total, True)):
        if stop <= start:
            continue
        sliding = layout.sliding_between(start, stop)
        first_sliding = start if layout.sliding(start) else start + 1
        first_global = start
        if layout.period is not None and layout.sliding(start):
            first_global = start + (layout.period - 1 - start % layout.period)
        add(kind_of(rest, True, shared), sliding, first_sliding)
        add(kind_of(rest, False, shared), stop - start - sliding, first_global)
    ordered = sorted(groups.items(), key=lambda item: item[1][1])
    return [LayerGroup(kind, count, first) for kind, (count, first) in ordered]
