"""The assumptions a system-table verdict rests on, each with its published (or stated) range, and one way to move one.

:data:`ASSUMPTIONS` is the registry (one definition): for each top assumption of the verdict — each family's host
power per chip, PUE, the searched chip's GEMM and framework efficiency, the per-event energies that set a chip's
modelled power (MAC, HBM, link, leakage), HBM $/GB, wafer price, package cost and the hosts' cost — its nominal value
*imported from where the model defines it* (never retyped), its low/high and where that range comes from.

:func:`moved` evaluates the model with one (or several) assumption(s) moved::

    with moved("pue", 1.4):
        result = run_search(config)     # every chip count, cluster and cache key under PUE 1.4

How it stays correct:

* **The value.** The model reads these constants from module globals at call time; :func:`moved` rebinds those
  globals (and the dict entries of :data:`~phaze_env.hardware.system.SYSTEM_FAMILIES`,
  :data:`~phaze_env.hardware.cost.NODES`, :data:`~phaze_env.stacks.SYSTEM_STACKS`) and restores them on exit, even
  on an exception.
* **The caches.** Every content-addressed cache key is :func:`phaze_env.cache.code_key`, a hash of the code of the
  keyed module's import closure and of its inputs. A moved constant is an edit of that code, so :func:`moved` records
  it in ``$PHAZE_MOVED_ASSUMPTIONS`` and ``code_key`` adds every moved constant whose defining module is in the
  closure to the key: a result computed under a moved assumption never answers a nominal question or the other way
  round (a search's ``results.db`` signature is such a key too). Caches whose closure does not hold the module (the
  traced graphs, the layer schedules) are shared, correctly: they cannot read it. The in-process memos of the system
  space (:func:`phaze_env.design._system_arch_space` and its area tables) are cleared on entry and on exit.
* **Worker processes.** The search's spawned workers inherit the environment variable and apply the same moves at
  start-up (:func:`apply_environment`, called by ``search.executors``); a Dask cluster's workers do not, so
  :func:`moved` is for local runs.

Moves do not nest: :func:`moved` inside :func:`moved` raises (a sensitivity study moves one assumption at a time).
Another module's constants join the registry with one :class:`Assumption` entry (:func:`scalar` for a module-level
number read at call time).
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Callable, Iterator

from phaze_env.cache import MOVED_ASSUMPTIONS_ENV
from phaze_env import design
from phaze_env.design import SystemDesignSpace
from phaze_env.hardware import cost, energy, system
from phaze_env.hardware.accelerator import H100_GEMM_EFFICIENCY
from phaze_env.hardware.number_format import FP8_MAC_RATE
from phaze_env.stacks import (DEFAULT_SYSTEM_STACK, FLASH_ATTENTION2_H100_EFFICIENCY, SYSTEM_STACKS,
                              get_system_stack)

Patch = tuple[Any, str, Any]
"""One rebinding: (a module or a dict, attribute or key, new value)."""


@dataclass(frozen=True)
class Assumption:
    """One assumption of the verdict: ``nominal`` (the model's own value, read from where it is defined), the range
    ``low``–``high`` and its ``source``; ``module`` is where the constant is defined (what cache keys hash) and
    ``patches(value)`` the rebindings that make the model run at ``value``."""

    name: str
    label: str
    unit: str
    nominal: float
    low: float
    high: float
    source: str
    module: str
    patches: Callable[[float], list[Patch]]

    def __post_init__(self) -> None:
        if not (math.isfinite(self.low) and math.isfinite(self.high) and self.low <= self.nominal <= self.high):
            raise ValueError(f"assumption {self.name}: the range {self.low:g}–{self.high:g} must hold its nominal "
                             f"{self.nominal:g}")

    def ends(self) -> dict[str, float]:
        """The range's ends that differ from the nominal value (``low``, ``high``)."""
        return {end: value for end, value in (("low", self.low), ("high", self.high)) if value != self.nominal}

    def describe(self, value: float) -> str:
        return f"{self.label} {value:,.4g}{' ' + self.unit if self.unit else ''}"


def scalar(module, attribute: str) -> Callable[[float], list[Patch]]:
    """The patches of a module-level number read at call time."""
    return lambda value: [(module, attribute, value)]


def _host(family: str, field: str) -> Callable[[float], list[Patch]]:
    def patches(value: float) -> list[Patch]:
        current = system.SYSTEM_FAMILIES[family]
        host = dataclasses.replace(current.host, **{field: value})
        return [(system.SYSTEM_FAMILIES, family, dataclasses.replace(current, host=host))]
    return patches


def _mac_energy(value: float) -> list[Patch]:
    """A bf16 MAC's energy and the FP8 MAC's derived from it (:data:`energy.FP8_MAC_PJ`'s rule)."""
    return [(energy, "MAC_PJ", value), (energy, "FP8_MAC_PJ", value / FP8_MAC_RATE)]


def _wafer_factor(value: float) -> list[Patch]:
    """Every node's wafer price × ``value`` (the nodes' relative prices kept)."""
    return [(cost.NODES, name, dataclasses.replace(node, wafer_cost_usd=node.wafer_cost_usd * value))
            for name, node in cost.NODES.items()]


def _design_efficiency(value: float) -> list[Patch]:
    return [(SYSTEM_STACKS, name, dataclasses.replace(stack, design_efficiency=value))
            for name, stack in SYSTEM_STACKS.items()]


def _design_attention(value: float) -> list[Patch]:
    return [(SYSTEM_STACKS, name, dataclasses.replace(stack, design_attention_efficiency=value))
            for name, stack in SYSTEM_STACKS.items()]


_STACK = get_system_stack(DEFAULT_SYSTEM_STACK)
_DESIGN_FIT, _DESIGN_FIT_CHIP = _STACK.design_fit(SystemDesignSpace().base)
_FIT_EFFICIENCIES = [fit.framework_efficiency for fit in _STACK.fits]
_TPUV4_HOST_W = system.SYSTEM_FAMILIES["tpuv4-torus"].host.w_per_chip
_A100_HOST_W = system.SYSTEM_FAMILIES["dgx-a100"].host.w_per_chip
_H100_HOST_W = system.SYSTEM_FAMILIES["dgx-h100"].host.w_per_chip
DGX_H100_MEASURED_MAX_W = 8_400.0
"""The highest power an 8-GPU H100 HGX node drew while training (ResNet and Llama2-13b): ≈ 8.4 kW, 18 % under its
10.2 kW rating (Latif et al., "Single-Node Power Demand During AI Training: Measurements on an 8-GPU NVIDIA H100
System", IEEE Access 13, 61740–61747, 2025). The low end of the DGX hosts' power: the node's measured maximum less
its GPUs at their full TDP."""
_MEASURED_OVER_RATED = DGX_H100_MEASURED_MAX_W / system.DGX_H100_MAX_W
# what each family's measured figure holds beyond its host, charged apart (the scale-up fabric and the NICs,
# system.TPUV4_HOST / DGX_*_HOST): a measured range is a range of the host share once that is taken out too
_TPUV4_CARVED_W = system.TPUV4_SYSTEM_W_PER_CHIP - system.TPUV4_CHIP_MEAN_W - _TPUV4_HOST_W
_A100_CARVED_W = (system.DGX_A100_MAX_W - system.SCALE_UP_DOMAIN * cost.PUBLISHED["a100"].power_w) \
    / system.SCALE_UP_DOMAIN - _A100_HOST_W
_H100_CARVED_W = (system.DGX_H100_MAX_W - system.SCALE_UP_DOMAIN * cost.PUBLISHED["h100"].power_w) \
    / system.SCALE_UP_DOMAIN - _H100_HOST_W

_B200_HOST_W = system.SYSTEM_FAMILIES["dgx-b200"].host.w_per_chip
_GB200_HOST_W = system.SYSTEM_FAMILIES["gb200-nvl72"].host.w_per_chip
_TPUV5P_HOST_W = system.SYSTEM_FAMILIES["tpuv5p-torus"].host.w_per_chip
_MI300X_HOST_W = system.SYSTEM_FAMILIES["mi300x-platform"].host.w_per_chip


def _blackwell_host_w(system_w: float, chip: str, gpus: int) -> float:
    """A Blackwell system's host share per GPU at ``system_w`` of system power (DGX B200's node, GB200 NVL72's rack of
    ``gpus``): the model's own rule, :func:`~phaze_env.hardware.system.dgx_host_w_per_chip`."""
    return system.dgx_host_w_per_chip(system_w, cost.PUBLISHED[chip].power_w, system.NVSWITCH_GEN4,
                                      cost.B200_NVLINKS, system.NDR_FAT_TREE, cost.NVLINK5_LINK_BPS, gpus)


def exponent_at_mi300x_clock(clock_hz: float, tolerance: float = 1e-6) -> float:
    """The V–f exponent k (:data:`energy.VOLTAGE_FREQUENCY_EXPONENT`) at which the MI300X rival, capped at its 750 W TBP
    (:func:`~phaze_env.hardware.system.rival_chip`), runs at ``clock_hz``: the exponent a measured clock implies.
    Its capped clock rises with k (a smaller k saves less power per step down, so the cap needs a lower clock), so
    bisection over k's stated range 0–1 finds it; a clock outside what that range gives raises."""
    def clock_at(exponent: float) -> float:
        saved = energy.VOLTAGE_FREQUENCY_EXPONENT
        energy.VOLTAGE_FREQUENCY_EXPONENT = exponent
        try:
            return system.mi300x_engine_clock_hz()
        finally:
            energy.VOLTAGE_FREQUENCY_EXPONENT = saved

    low, high = 0.0, 1.0
    if not clock_at(low) <= clock_hz <= clock_at(high):
        raise ValueError(f"an MI300X clock of {clock_hz / 1e6:,.0f} MHz is outside what V ∝ f^k gives for k in 0–1 "
                         f"({clock_at(low) / 1e6:,.0f}–{clock_at(high) / 1e6:,.0f} MHz)")
    while high - low > tolerance:
        middle = (low + high) / 2
        low, high = (middle, high) if clock_at(middle) <= clock_hz else (low, middle)
    return (low + high) / 2


MEASURED_EXPONENT = exponent_at_mi300x_clock(cost.MI300X_GEMM_MEDIAN_CLOCKS_HZ["bf16"])
"""The V–f exponent the MI300X's measured median bf16 GEMM clock implies: the k at which the model's capped MI300X runs
at AMD's 1,207 MHz (ROCm blog "Measuring Max-Achievable FLOPs – Part 2", 2025, Table 1;
``cost.MI300X_GEMM_MEDIAN_CLOCKS_HZ``). A fit of k to one measurement, the low end of its range: the measured clock
also holds what the model leaves out (data-toggle power, boost voltage), so it bounds k from below, not exactly."""

ASSUMPTIONS: dict[str, Assumption] = {a.name: a for a in (
    Assumption("host_w.tpuv4-torus", "torus host power per chip", "W", _TPUV4_HOST_W,
               280.0 - system.TPUV4_CHIP_MEAN_W - _TPUV4_CARVED_W, 380.0 - system.TPUV4_CHIP_MEAN_W - _TPUV4_CARVED_W,
               "TPUV4_SYSTEM_W_PER_CHIP's stated range 280–380 W per chip at the system (Patterson et al. 2022; "
               "DESIGN.md) less the 170 W chip and the OCS and NIC shares charged apart (17 W): host share 93–193 W "
               "(torus designs and the TPUv4 reference)",
               "phaze_env.hardware.system", _host("tpuv4-torus", "w_per_chip")),
    Assumption("host_w.dgx-a100", "DGX A100 host power per GPU", "W", _A100_HOST_W,
               (system.DGX_A100_MAX_W * _MEASURED_OVER_RATED - system.SCALE_UP_DOMAIN * cost.PUBLISHED["a100"].power_w)
               / system.SCALE_UP_DOMAIN - _A100_CARVED_W, _A100_HOST_W,
               "high: the DGX A100 datasheet's 6.5 kW maximum less 8 × 400 W (the nominal); low: the same node at the "
               "measured/rated ratio Latif et al. 2025 found on DGX H100 (8.4/10.2 kW; assumption: A100 nodes alike)",
               "phaze_env.hardware.system", _host("dgx-a100", "w_per_chip")),
    Assumption("host_w.dgx-h100", "DGX H100 host power per GPU (also switched designs')", "W", _H100_HOST_W,
               (DGX_H100_MEASURED_MAX_W - system.SCALE_UP_DOMAIN * cost.PUBLISHED["h100"].power_w)
               / system.SCALE_UP_DOMAIN - _H100_CARVED_W, _H100_HOST_W,
               "high: the DGX H100 datasheet's 10.2 kW maximum less 8 × 700 W (the nominal); low: the 8.4 kW "
               "maximum measured in training (Latif et al., IEEE Access 2025) less 8 × 700 W; both less the NVSwitch "
               "and NIC shares charged apart",
               "phaze_env.hardware.system", _host("dgx-h100", "w_per_chip")),
    Assumption("host_w.dgx-b200", "DGX B200 host power per GPU (B200 rival)", "W", _B200_HOST_W,
               _blackwell_host_w(system.DGX_B200_MAX_W * _MEASURED_OVER_RATED, "b200", system.SCALE_UP_DOMAIN),
               _B200_HOST_W,
               "high: the DGX B200 user guide's 14.3 kW maximum less 8 × 1,000 W (the nominal, system.DGX_B200_HOST); "
               "low: the same node at the measured/rated ratio Latif et al. 2025 found on DGX H100 (8.4/10.2 kW; "
               "assumption: Blackwell nodes alike); both less the NVLink-switch and NIC shares charged apart",
               "phaze_env.hardware.system", _host("dgx-b200", "w_per_chip")),
    Assumption("host_w.gb200-nvl72", "GB200 NVL72 host power per GPU (GB200 rival)", "W", _GB200_HOST_W,
               _GB200_HOST_W,
               _blackwell_host_w(132_000.0, "gb200", system.GB200_NVL72_CHIPS),
               "system.GB200_NVL72_RACK_W's stated range: 120 kW (NVIDIA at GTC 2024, the nominal) to 132 kW (OEM "
               "racks) per 72 GPUs, less 72 × 1,200 W and the NVLink-switch and NIC shares charged apart",
               "phaze_env.hardware.system", _host("gb200-nvl72", "w_per_chip")),
    Assumption("host_w.tpuv5p-torus", "TPU v5p host power per chip (TPU v5p rival)", "W", _TPUV5P_HOST_W,
               110.0, 250.0,
               "system.TPUV5P_HOST's stated range 110–250 W per chip (Google publishes no v5p system power; the "
               "nominal carries TPU v4's host share over)",
               "phaze_env.hardware.system", _host("tpuv5p-torus", "w_per_chip")),
    Assumption("host_w.mi300x-platform", "MI300X platform host power per GPU (MI300X rival)", "W", _MI300X_HOST_W,
               300.0, 600.0,
               "system.MI300X_HOST's stated range 300–600 W per GPU (AMD publishes no platform power in the model's "
               "sources; the nominal carries DGX H100's host share over)",
               "phaze_env.hardware.system", _host("mi300x-platform", "w_per_chip")),
    Assumption("pue", "PUE", "", system.PUE, 1.08, 1.58,
               "low: Meta's reported fleet PUE 1.08 (sustainability reports, as system.PUE cites); high: the industry "
               "average 1.58 (Uptime Institute Global Data Center Survey 2023)",
               "phaze_env.hardware.system", scalar(system, "PUE")),
    Assumption("design_gemm_efficiency", "searched chips' GEMM efficiency", "", system.DESIGN_GEMM_EFFICIENCY,
               H100_GEMM_EFFICIENCY, 1.0,
               "low: H100's measured MAMF (accelerator.H100_GEMM_EFFICIENCY); high: the nominal rate, the tpuv4 "
               "preset's 1.0. The references keep theirs: each is pinned by a fit to a published run",
               "phaze_env.hardware.system", scalar(system, "DESIGN_GEMM_EFFICIENCY")),
    Assumption("design_framework_efficiency", "searched chips' framework efficiency", "",
               _DESIGN_FIT.framework_efficiency, min(_FIT_EFFICIENCIES), max(_FIT_EFFICIENCIES),
               f"the searched chip has no published run and takes {_DESIGN_FIT_CHIP}'s fit (a rule); the range is the "
               f"stack's fits on every reference chip ({', '.join(f'{f.chips[0]} {f.framework_efficiency:g}' for f in _STACK.fits)}; "
               "stacks.SYSTEM_STACKS)", "phaze_env.stacks", _design_efficiency),
    Assumption("design_attention_efficiency", "searched chips' fused attention rate", "of peak",
               _DESIGN_FIT.attention_efficiency, FLASH_ATTENTION2_H100_EFFICIENCY, 0.65,
               f"the searched chip runs the stack's fused causal attention kernel at {_DESIGN_FIT_CHIP}'s rate, itself "
               "an assumption (stacks.TPU_FLASH_ATTENTION_EFFICIENCY: FlashAttention-2's on A100, no published TPU "
               "figure); low: FlashAttention-2 on a chip it was not written for (H100, 0.35, Shah et al. 2024); high: "
               "0.65, above Transformer Engine's Hopper kernel (0.55) and within FlashAttention-3's 0.52–0.61 backward "
               "and 0.75 forward", "phaze_env.stacks", _design_attention),
    Assumption("mac_pj", "bf16 MAC energy (N7)", "pJ", energy.MAC_PJ, energy.MAC_PJ * 0.5, energy.MAC_PJ * 1.5,
               "assumption ±50 %: energy.MAC_PJ is Horowitz's 45 nm figure scaled by 0.25 to 7 nm, not a measurement "
               "(sets every chip's modelled MAC power, designs and references alike)",
               "phaze_env.hardware.energy", _mac_energy),
    Assumption("hbm_pj_per_byte", "HBM energy", "pJ/B", energy.HBM_PJ_PER_BYTE, energy.HBM_PJ_PER_BYTE * 0.5,
               energy.HBM_PJ_PER_BYTE * 1.5,
               "assumption ±50 %: energy.HBM_PJ_PER_BYTE is HBM2's 3.9 pJ/bit (O'Connor et al., MICRO 2017) for every "
               "generation; HBM3/3E per-bit figures are not in the model's sources",
               "phaze_env.hardware.energy", scalar(energy, "HBM_PJ_PER_BYTE")),
    Assumption("link_pj_per_byte", "chip-to-chip link energy", "pJ/B", energy.LINK_PJ_PER_BYTE,
               energy.LINK_PJ_PER_BYTE * 0.5, energy.LINK_PJ_PER_BYTE * 1.5,
               "assumption ±50 % around energy.LINK_PJ_PER_BYTE's 5 pJ/bit SerDes figure (no per-generation source)",
               "phaze_env.hardware.energy", scalar(energy, "LINK_PJ_PER_BYTE")),
    Assumption("leakage_w_per_mm2", "leakage", "W/mm²", energy.LEAKAGE_W_PER_MM2, energy.LEAKAGE_W_PER_MM2 * 0.5,
               energy.LEAKAGE_W_PER_MM2 * 1.5, "energy.LEAKAGE_W_PER_MM2's stated range ±50 % (assumption)",
               "phaze_env.hardware.energy", scalar(energy, "LEAKAGE_W_PER_MM2")),
    Assumption("voltage_frequency_exponent", "V–f exponent k (V ∝ f^k) of capped and binned rivals", "",
               energy.VOLTAGE_FREQUENCY_EXPONENT, MEASURED_EXPONENT, energy.VOLTAGE_FREQUENCY_EXPONENT,
               f"high: Hennessy & Patterson's first-order DVFS, V ∝ f (energy.VOLTAGE_FREQUENCY_EXPONENT, the nominal; "
               f"the highest capped clock, in the rivals' favour); low: k = {MEASURED_EXPONENT:.3f}, at which the "
               f"capped MI300X runs at AMD's measured median bf16 GEMM clock, "
               f"{cost.MI300X_GEMM_MEDIAN_CLOCKS_HZ['bf16'] / 1e6:,.0f} MHz (ROCm blog \"Measuring Max-Achievable "
               "FLOPs – Part 2\", 2025; MEASURED_EXPONENT). Moves only the rivals run below their silicon's top clock "
               "(the power-capped B200, GB200 and MI300X; B200's bin): no design, TPUv4, A100 or H100 is",
               "phaze_env.hardware.energy", scalar(energy, "VOLTAGE_FREQUENCY_EXPONENT")),
    Assumption("hbm_usd_per_gb", "HBM price", "$/GB", cost.HBM_USD_PER_GB, 7.0, 20.0,
               "cost.HBM_USD_PER_GB's stated range: LLMCompass's $7/GB (ISCA 2024) to $20/GB (docs/cost_model.md)",
               "phaze_env.hardware.cost", scalar(cost, "HBM_USD_PER_GB")),
    Assumption("wafer_cost_factor", "wafer price (every node) ×", "", 1.0, 0.75, 1.25,
               "assumption ±25 %: the CSET wafer prices are one estimate; cost.N3_WAFER_COST_USD states a 25 % spread "
               "between analyst estimates",
               "phaze_env.hardware.cost", _wafer_factor),
    Assumption("package_usd_per_mm2", "package, assembly and test per mm² of interposer", "$/mm²",
               cost.PACKAGE_USD_PER_MM2, cost.PACKAGE_USD_PER_MM2 * 0.5, cost.PACKAGE_USD_PER_MM2 * 1.5,
               "cost.PACKAGE_USD's stated range ±50 % (the per-mm² figure is the H100's package over its interposer)",
               "phaze_env.hardware.cost", scalar(cost, "PACKAGE_USD_PER_MM2")),
    Assumption("package_bond_yield", "package assembly yield per die and HBM stack", "", cost.PACKAGE_BOND_YIELD,
               0.98, 0.998, "cost.PACKAGE_BOND_YIELD's stated range (no published CoWoS assembly yield)",
               "phaze_env.hardware.cost", scalar(cost, "PACKAGE_BOND_YIELD")),
    Assumption("host_usd", "host cost per chip (every family)", "$", system.DGX_HOST_USD_PER_CHIP, 2_500.0, 10_000.0,
               "system.DGX_HOST_USD_PER_CHIP's and the TPU v4 host's stated range $2,500–10,000",
               "phaze_env.hardware.system",
               lambda value: [p for family in system.SYSTEM_FAMILIES for p in _host(family, "usd_per_chip")(value)]),
)}
"""The registry, by name. Not modelled, hence not here: electricity price (no objective prices operation: the table
compares capital cost and wall power, not cost of ownership)."""


def get_assumption(name: str) -> Assumption:
    if name not in ASSUMPTIONS:
        raise ValueError(f"unknown assumption {name!r}; known: {', '.join(ASSUMPTIONS)}")
    return ASSUMPTIONS[name]


def _memos() -> list:
    """The in-process memos whose results depend on moved constants (the system space's rows and area tables)."""
    return [design._system_arch_space, design._system_area_tables]


def _rebind(patches: list[Patch]) -> list[Patch]:
    """Apply ``patches``; return the rebindings that undo them."""
    undo = []
    for target, key, value in patches:
        if isinstance(target, dict):
            undo.append((target, key, target[key]))
            target[key] = value
        else:
            undo.append((target, key, getattr(target, key)))
            setattr(target, key, value)
    return undo


def _check_value(assumption: Assumption, value: float) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        raise ValueError(f"assumption {assumption.name} must be moved to a positive finite number, got {value!r}")
    return float(value)


@contextmanager
def moved(name: str | None = None, value: float | None = None, /, **more: float) -> Iterator[dict[str, float]]:
    """Run the model with assumption ``name`` at ``value`` (and/or ``more``: name=value pairs whose names are
    identifiers, e.g. ``pue=1.4``); yields the moves. See the module docstring for how values, cache keys and worker
    processes follow."""
    moves = dict(more)
    if name is not None:
        moves[name] = value
    if not moves:
        raise ValueError("moved() needs at least one assumption and its value")
    if os.environ.get(MOVED_ASSUMPTIONS_ENV):
        raise RuntimeError(f"assumptions are already moved ({os.environ[MOVED_ASSUMPTIONS_ENV]}); moves do not nest")
    checked = {n: _check_value(get_assumption(n), v) for n, v in moves.items()}
    undo: list[Patch] = []
    try:
        for n, v in checked.items():
            undo += _rebind(ASSUMPTIONS[n].patches(v))
        os.environ[MOVED_ASSUMPTIONS_ENV] = encode(checked)
        for memo in _memos():
            memo.cache_clear()
        yield checked
    finally:
        os.environ.pop(MOVED_ASSUMPTIONS_ENV, None)
        _rebind(list(reversed(undo)))
        for memo in _memos():
            memo.cache_clear()


def encode(moves: dict[str, float]) -> str:
    """The environment's form of ``moves``: ``[[module, name, value], …]`` sorted, what ``cache.code_key`` reads."""
    return json.dumps(sorted([ASSUMPTIONS[n].module, n, float(v).hex()] for n, v in moves.items()))


def apply_environment() -> None:
    """Apply the moves ``$PHAZE_MOVED_ASSUMPTIONS`` names (a search worker started inside :func:`moved`); nothing when
    it is unset. For a process that lives inside the move (it is not undone)."""
    raw = os.environ.get(MOVED_ASSUMPTIONS_ENV)
    if not raw:
        return
    for _, name, value in json.loads(raw):
        _rebind(get_assumption(name).patches(float.fromhex(value)))
    for memo in _memos():
        memo.cache_clear()


__all__ = ["ASSUMPTIONS", "Assumption", "DGX_H100_MEASURED_MAX_W", "MEASURED_EXPONENT", "apply_environment", "encode",
           "exponent_at_mi300x_clock", "get_assumption", "moved", "scalar"]
