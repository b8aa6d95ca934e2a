"""Chip area, power and cost of the presets with system data against their published figures.

Prints ``docs/cost_model.md`` (markdown) from :mod:`phaze_env.hardware.cost`: the validation table (published,
modelled, error, source), each chip's breakdown by block / term / item, and the sensitivity of the results
to the weakest constants (D0, HBM $/GB, package cost, bond yield, leakage, N5 logic density, yield clustering)::

    python -m experiments.cost_table                         # print the markdown
    python -m experiments.cost_table --write docs/cost_model.md
"""

from __future__ import annotations

import sys
from dataclasses import replace
from typing import Sequence

from phaze_env.cli import OneLineParser, print_output
from phaze_env.files import write_text_atomic
from phaze_env.hardware import area, cost, energy
from phaze_env.hardware.accelerator import get_preset
from phaze_env.hardware.generations import REFERENCE_TECHNOLOGIES
from phaze_env.hardware.system import HBM_GENERATIONS, mi300x_engine_clock_hz, rival_chip

COMMAND = "python -m experiments.cost_table --write docs/cost_model.md"


def error_pct(modelled: float, published: float) -> float:
    return 100.0 * (modelled - published) / published


def table(header: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """A Markdown table; a ``|`` inside a cell (e.g. a plan's ``rc=none|full``) is escaped."""
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(str(cell).replace("|", "\\|") for cell in row) + " |" for row in rows]
    return "\n".join(lines)


STACKED_DIE_AREAS_MM2 = {"mi300x": (("XCD", cost.MI300X_XCD_AREA_MM2, "cost.MI300X_XCD_AREA_MM2"),
                                    ("IOD", cost.MI300X_IOD_AREA_MM2, "cost.MI300X_IOD_AREA_MM2"))}
"""The published area of one compute die and one base die of each 3-D stacked chip (its constants cite them)."""


def stacked_die_rows(name: str, estimate: cost.ChipEstimate) -> list[list[str]]:
    """A 3-D stacked chip's compute-die and base-die areas against the published ones (none for other chips)."""
    if name not in STACKED_DIE_AREAS_MM2:
        return []
    modelled = (estimate.area_per_die_mm2, estimate.area_per_base_die_mm2)
    return [[name, f"one {label} (mm²)", f"{published:.0f}", f"{value:.0f}", f"{error_pct(value, published):+.1f} %",
             source] for (label, published, source), value in zip(STACKED_DIE_AREAS_MM2[name], modelled)]


def validation_rows(estimates: dict[str, cost.ChipEstimate]) -> list[list[str]]:
    """One row per chip and quantity: published, modelled, error % (or the bound it must respect), source."""
    rows = []
    for name, estimate in estimates.items():
        published = cost.PUBLISHED[name]
        if published.die_area_mm2 is not None:
            rows.append([name, "die area (mm²)", f"{published.die_area_mm2:.0f}", f"{estimate.die_area_mm2:.0f}",
                         f"{error_pct(estimate.die_area_mm2, published.die_area_mm2):+.1f} %", published.area_source])
        else:
            per_die = estimate.area_per_die_mm2
            verdict = "within bound" if per_die < published.die_area_bound_mm2 else "OVER the bound"
            rows.append([name, "die area (mm²)", f"< {published.die_area_bound_mm2:.0f} (bound)",
                         f"{per_die:.0f}", f"{verdict} (no figure to check)", published.area_source])
        rows += stacked_die_rows(name, estimate)
        if published.power_w is None:
            rows.append([name, f"power (W, {published.power_kind})", "not published", f"{estimate.total_power_w:.0f}",
                         "no figure to check", published.power_source])
        else:
            rows.append([name, f"power (W, {published.power_kind})", f"{published.power_w:.0f}",
                         f"{estimate.total_power_w:.0f}", f"{error_pct(estimate.total_power_w, published.power_w):+.1f} %",
                         published.power_source])
    return rows


def breakdown_table(estimates: dict[str, cost.ChipEstimate], part: str, unit: str, digits: int = 1) -> str:
    names = list(estimates)
    terms = list(getattr(estimates[names[0]], part))
    rows = [[term] + [f"{getattr(estimates[n], part)[term]:,.{digits}f}" for n in names] for term in terms]
    rows.append(["**total**"] + [f"**{sum(getattr(estimates[n], part).values()):,.{digits}f}**" for n in names])
    return table([f"{part.split('_')[0]} ({unit})"] + names, rows)


def sensitivity_rows(name: str) -> list[list[str]]:
    """The chip's cost, power or area when one weak constant moves, against the default."""
    acc, system = get_preset(name), cost.preset_system(name)
    base = cost.chip_estimate(acc, system)
    d0 = system.process.defect_density_per_cm2
    rows = []
    for label, options in ((f"D0 × 0.5 ({d0 / 2:.3f}/cm²)", {"defect_density_per_cm2": d0 / 2}),
                           (f"D0 × 2 ({d0 * 2:.2f}/cm²)", {"defect_density_per_cm2": d0 * 2}),
                           ("HBM $7/GB", {"hbm_usd_per_gb": 7.0}), ("HBM $20/GB", {"hbm_usd_per_gb": 20.0}),
                           (f"package × 0.5 (${cost.PACKAGE_USD_PER_MM2 * 0.5:.2f}/mm²)",
                            {"package_usd_per_mm2": cost.PACKAGE_USD_PER_MM2 * 0.5}),
                           (f"package × 1.5 (${cost.PACKAGE_USD_PER_MM2 * 1.5:.2f}/mm²)",
                            {"package_usd_per_mm2": cost.PACKAGE_USD_PER_MM2 * 1.5}),
                           ("bond yield 0.98", {"bond_yield": 0.98}), ("bond yield 0.998", {"bond_yield": 0.998}),
                           ("yield α = 1 (strong clustering)", {"alpha": 1.0}),
                           ("yield α = 1000 (≈ Poisson)", {"alpha": 1000.0})):
        moved = cost.chip_estimate(acc, system, **options)
        rows.append([name, label, f"${base.total_cost_usd:,.0f}", f"${moved.total_cost_usd:,.0f}",
                     f"{error_pct(moved.total_cost_usd, base.total_cost_usd):+.1f} %"])
    leakage = base.power_w["leakage"]
    for factor in (0.5, 1.5):
        moved_w = base.total_power_w + (factor - 1) * leakage  # leakage is linear in its constant
        rows.append([name, f"leakage × {factor} ({energy.LEAKAGE_W_PER_MM2 * factor:.2f} W/mm²)",
                     f"{base.total_power_w:.0f} W", f"{moved_w:.0f} W",
                     f"{error_pct(moved_w, base.total_power_w):+.1f} %"])
    d2d = base.power_w["die_to_die"]
    for factor in (0.5, 2.0) if d2d else ():
        moved_w = base.total_power_w + (factor - 1) * d2d  # die-to-die power is linear in its energy per bit
        rows.append([name, f"die-to-die × {factor:g} ({energy.D2D_PJ_PER_BIT * factor:g} pJ/bit)",
                     f"{base.total_power_w:.0f} W", f"{moved_w:.0f} W", f"{error_pct(moved_w, base.total_power_w):+.1f} %"])
    if system.process.logic_density_gain != 1.0:
        chip_level = replace(system.process, logic_density_gain=GH100_OVER_GA100_TRANSISTOR_DENSITY)
        moved = cost.chip_estimate(acc, replace(system, node=chip_level), allow_over_reticle=True)
        over = "" if moved.fits_reticle else " (over the reticle)"
        rows.append([name, f"logic density gain {GH100_OVER_GA100_TRANSISTOR_DENSITY:.2f}× (chip-level) not "
                     f"{system.process.logic_density_gain:.2f}×", f"{base.die_area_mm2:.0f} mm²",
                     f"{moved.die_area_mm2:.0f} mm²{over}", f"{error_pct(moved.die_area_mm2, base.die_area_mm2):+.1f} %"])
    return rows


GH100_OVER_GA100_TRANSISTOR_DENSITY = (80e9 / 814) / (54.2e9 / 826)
"""1.50: GH100's 80 B transistors on 814 mm² over GA100's 54.2 B on 826 mm² (NVIDIA whitepapers) — a chip-level
density gain N7 → 4N that also counts Hopper's design changes; the sensitivity case for TSMC's 1.8× logic."""


def generations_section() -> str:
    """The technology tables: nodes (density, energy, wafer, D0, year), HBM and SerDes generations (first shipping
    year) and each rival's own node and year (:mod:`phaze_env.hardware.generations`)."""
    nodes = table(["node", "logic density (× N7)", "SRAM density (× N7)", "energy/event (× N7)", "wafer ($)",
                   "D0 (/cm²)", "volume from"],
                  [[n.name, f"{n.logic_density_gain:.2f}", f"{n.sram_density_gain:.2f}", f"{n.energy_factor:.3f}",
                    f"{n.wafer_cost_usd:,.0f}", f"{n.defect_density_per_cm2:.2f}", n.volume_year]
                   for n in cost.NODES.values()])
    hbm = table(["HBM", "GiB/stack", "Gb/s/pin", "GB/s/stack", "first shipped"],
                [[g.name, f"{g.stack_gb:g}", f"{g.pin_rate_bps / 1e9:g}", f"{g.stack_bandwidth_Bps / 1e9:.0f}",
                  g.first_year] for g in HBM_GENERATIONS.values()])
    serdes = table(["SerDes lane", "Gb/s per direction", "mm² per lane pair", "first shipped"],
                   [[k.name, f"{k.lane_bps / 1e9:g}", f"{k.lane_pair_area_mm2:.3f}", k.first_year]
                    for k in cost.SERDES.values()])
    rivals = table(["rival", "technology (node · year: HBM shipping; fastest SerDes)"],
                   [[name, tech.describe()] for name, tech in REFERENCE_TECHNOLOGIES.items()])
    return f"""## Generations

"This design at node X, year Y" is `phaze_env.hardware.generations.Technology(node, year)`: the node's figures
below, the HBM generations shipping by the year and its fastest SerDes; `Technology.chip_system(choice)` builds a
system-space choice at that node and year, and `python -m phaze_env.hardware --preset NAME --node NODE --year YEAR`
prices a preset's chip there (a node without data, a year before the node's volume production, or an HBM generation not
yet shipping is one `ValueError`). Sources and ranges are in the docstrings of `cost.py` (nodes, SerDes) and
`system.py` (HBM).

{nodes}

{hbm}

{serdes}

Each rival at its own node and year (`generations.REFERENCE_TECHNOLOGIES`):

{rivals}
"""


def report() -> str:
    estimates = {name: cost.preset_estimate(name) for name in cost.SYSTEMS}
    systems = "\n".join(f"* **{name}** — {description}" for name, (_, description) in cost.SYSTEMS.items())
    yields = table(["chip", "die (mm²)", "node", "dies / 300 mm wafer", "yield", "good dies", "wafer ($)",
                    "die cost ($)"],
                   [[name, f"{e.area_per_die_mm2:.0f}" + (f" × {e.dies}" if e.dies > 1 else "")
                     + (f" on {e.area_per_base_die_mm2:.0f} × {e.base_dies}" if e.base_dies else ""),
                     cost.preset_system(name).process.name, e.dies_per_wafer,
                     f"{e.die_yield:.3f}", f"{e.dies_per_wafer * e.die_yield:.1f}",
                     f"{cost.preset_system(name).process.wafer_cost_usd:,.0f}", f"{e.cost_usd['die']:,.0f}"]
                    for name, e in estimates.items()])
    sensitivity = table(["chip", "change", "default", "changed", "change %"],
                        [row for name in estimates for row in sensitivity_rows(name)])
    b200, gb200, tpuv5p = estimates["b200"], estimates["gb200"], estimates["tpuv5p"]
    mi300x = estimates["mi300x"]
    mi300x_cap_ratio = rival_chip("mi300x")[0].clock_hz / get_preset("mi300x").clock_hz  # as the table's rival runs
    mi300x_cap_mhz = mi300x_engine_clock_hz() / 1e6
    chip_level = replace(cost.preset_system("b200").process, logic_density_gain=GH100_OVER_GA100_TRANSISTOR_DENSITY)
    b200_chip_level = cost.chip_estimate(get_preset("b200"), replace(cost.preset_system("b200"), node=chip_level),
                                         allow_over_reticle=True)
    b200_one_voltage = cost.chip_estimate(get_preset("b200"), replace(cost.preset_system("b200"), top_clock_hz=None))
    return f"""# Chip area, power and cost model

Written by `{COMMAND}` from `phaze_env/hardware/cost.py` (every number below comes from the code; the
constants and their sources are in the docstrings of `cost.py`, `area.py` and `energy.py`).

## What is modelled

* **Die area** = compute (the PHAZE area model of `area.py`, shrunk to the node's logic and SRAM density,
  × a core-style factor: 1 for a systolic TPU-like chip, {cost.SIMT_AREA_FACTOR:.2f} for SIMT GPU cores)
  + HBM PHY ({area.HBM_PHY_AREA_MM2:.2f} mm², does not shrink) and controller ({area.HBM_CONTROLLER_AREA_MM2:.2f} mm² at
  7 nm, shrinks) per HBM interface on the die + SerDes lane pairs per link + {area.IO_MISC_AREA_MM2:.0f} mm² of
  IO/misc per die. A chip of several dies (B200: two) adds a die-to-die interface per die; the reticle limit
  ({area.RETICLE_LIMIT_MM2:.0f} mm²) and the yield apply per die.
* **Power** (TDP-like: every unit busy every cycle) = the per-event energies of `energy.py` × peak rates
  (MACs, array↔buffer streams and the HBM stream through the buffer, vector lanes; × the node's energy factor
  and the core-style factor) + HBM {energy.HBM_PJ_PER_BYTE / 8:.2f} pJ/bit × nominal bandwidth + die-to-die
  {energy.D2D_PJ_PER_BIT} pJ/bit × the traffic between dies + SerDes
  {energy.LINK_PJ_PER_BYTE / 8:.0f} pJ/bit × total link bandwidth + leakage {energy.LEAKAGE_W_PER_MM2} W/mm² × die area.
* **Cost** = wafer cost / good dies (dies per 300 mm wafer with edge loss, `π(d/2)²/A − πd/√(2A)`; yield
  `(1 + D0·A/α)^−α` with α = {cost.NEGATIVE_BINOMIAL_ALPHA:g}) + HBM ${cost.HBM_USD_PER_GB:g}/GB × capacity
  + package/assembly/test ${cost.PACKAGE_USD_PER_MM2:.2f} per mm² of interposer ((dies + {cost.HBM_STACK_FOOTPRINT_MM2:.0f} mm² per HBM site)
  × {cost.INTERPOSER_AREA_OVERHEAD:g}: the H100's ${cost.PACKAGE_USD:,.0f} CoWoS-S over its interposer), all over the assembly yield
  {cost.PACKAGE_BOND_YIELD:g}^(dies + HBM stacks) (`assembly_yield`: the known-good parts a failed bond scraps).

System fields of the presets (`cost.SYSTEMS`):

{systems}

**Calibrated vs predicted.** The SIMT factor is GA100's die-photo area of SMs + crossbar + L2 (LLMCompass,
ISCA 2024, Fig. 6a) over the a100 preset's template compute area, and the HBM, SerDes and IO areas come
from the same die photo, so the A100 die area checks the bookkeeping, not the model. H100 is a prediction
(another node, another SerDes, the same factor); TPUv4 is a prediction (template as is, no factor) against
a published bound only. No power constant was fitted to the published powers: the per-event energies are
those `energy.py` already had, the leakage density is a round assumption, and SIMT chips' core power
inherits the area factor (an assumption: power follows active area).

## Published vs modelled

{table(["chip", "quantity", "published", "modelled", "error", "source"], validation_rows(estimates))}

TPUv4's die area is not published; Jouppi et al. 2023 give only "< 600 mm²". This repository's earlier
whole-die figure (architecture area + a fixed 135 mm² uncore, 400 mm², now replaced by this model) was itself
calibrated to an ≈ 400 mm² estimate, so the {estimates["tpuv4"].die_area_mm2:.0f} mm² here is compared with the bound only.
TPUv4's power figure is the maximum chip power; its mean power in production is lower. The template has
no SparseCores, which take ≈ 5 % of TPUv4's die area and power (Jouppi et al. 2023), so the TPUv4 rows
leave out ≈ 20 mm² and ≈ 10 W.

**The 2024 flagships, as predictions.** Nothing was fitted to B200, GB200 or TPU v5p: their presets take the
datasheets' rates, their chip systems the published node, HBM stacks and links, and the only constants they add —
TSMC's N4P density and energy claims, 200G lane area (= 100G's, assumption), a die-to-die interface at UCIe's
shoreline density and {energy.D2D_PJ_PER_BIT} pJ/bit — come from their own sources, not from these chips' figures.
B200 is **two** reticle-limited dies: the model splits its compute, HBM interfaces and links over `dies = 2`, gives
each die its IO/misc block and a 10 TB/s die-to-die interface ({b200.area_mm2["die_to_die"]:.0f} mm², {b200.power_w["die_to_die"]:.0f} W), checks the
reticle and prices the yield per die ({b200.area_per_die_mm2:.0f} mm² each; as one die it would be {b200.die_area_mm2:.0f} mm², over the
reticle and at a yield of {cost.die_yield(b200.die_area_mm2, cost.get_node("4NP").defect_density_per_cm2):.2f}). Its published die area is not a mm² figure: NVIDIA says "two
reticle-limited dies" and TechInsights' teardown "a near doubling of the GPU die area versus Hopper", read here
as 2 × GH100's 814 mm². The modelled silicon is {-error_pct(b200.die_area_mm2, cost.PUBLISHED["b200"].die_area_mm2):.0f} % under it: B200 has 2.6× GH100's transistors
(208 B) but the template sees only what its rates need — 2.3× the dense MACs, 2× the buffer — and nothing of
its FP4/FP6 datapaths or decompression engines. At GH100's measured chip-level density over GA100 (1.50×, the
"Sensitivity" rows) instead of TSMC's standard-cell claim the same B200 is {b200_chip_level.die_area_mm2:,.0f} mm².

B200's power is predicted at {b200.total_power_w:.0f} W against a 1,000 W TDP ({error_pct(b200.total_power_w, cost.PUBLISHED["b200"].power_w):+.1f} %), and the same silicon as a GB200 GPU at
{gb200.total_power_w:.0f} W against its 1,200 W ({error_pct(gb200.total_power_w, cost.PUBLISHED["gb200"].power_w):+.1f} %). NVIDIA sells the same dies at 2.25 PFLOP/s for 1,000 W and at 2.5 PFLOP/s
for 1,200 W — 11 % more rate for 20 % more power, the signature of voltage–frequency scaling (dynamic power
∝ f·V²). So the B200's chip system names the GB200's clock as its silicon's top bin (`ChipSystem.top_clock_hz`): the
per-event energies hold at the top bin, and the B200 at {cost.bin_clock_ratio(get_preset("b200"), cost.preset_system("b200")):.2f}× that clock runs at a voltage ∝ f^k (k =
`energy.VOLTAGE_FREQUENCY_EXPONENT` = {energy.VOLTAGE_FREQUENCY_EXPONENT:g}, Hennessy & Patterson's first-order DVFS): dynamic energy per event × {energy.dvfs_energy_factor(cost.bin_clock_ratio(get_preset("b200"), cost.preset_system("b200"))):.2f},
leakage × {energy.dvfs_static_factor(cost.bin_clock_ratio(get_preset("b200"), cost.preset_system("b200"))):.2f}. A prediction, not a fit: the clock ratio is the two datasheets' peak rates, the 1,000 W is not
used, and no voltage is needed. Without the voltage step (k = 0, one energy per event per node) it was
{b200_one_voltage.total_power_w:.0f} W ({error_pct(b200_one_voltage.total_power_w, cost.PUBLISHED["b200"].power_w):+.1f} %), outside ±20 %. Over the die-to-die energy's range (0.25–1 pJ/bit, "Sensitivity") the B200 error
spans {error_pct(b200.total_power_w - b200.power_w["die_to_die"] / 2, cost.PUBLISHED["b200"].power_w):+.1f} % to {error_pct(b200.total_power_w + b200.power_w["die_to_die"], cost.PUBLISHED["b200"].power_w):+.1f} %. HBM is not the cause: the model's {energy.HBM_PJ_PER_BYTE / 8:.2f} pJ/bit is the 3.9 pJ/bit Samsung
states for HBM3E (its HBM4E announcement, 2025, as reported by the trade press).

TPU v5p: Google publishes neither its node, its die area nor its power (Cloud TPU v5p documentation gives rates,
HBM and ICI only), so the {tpuv5p.die_area_mm2:.0f} mm² and {tpuv5p.total_power_w:.0f} W here (node N5 assumed) are predictions with **no published
figure to check**; the must-show "TPU v5p or Trillium within ±20 %" cannot be shown against a vendor figure,
and Trillium's are not published either.

MI300X is built as AMD builds it (`cost.SYSTEMS["mi300x"]`): {cost.MI300X_XCDS} compute dies (XCDs) on N5, 3-D stacked on
{cost.MI300X_IODS} I/O dies on N6 (`cost.N6`) that carry the Infinity Cache, the HBM3 interfaces, the Infinity Fabric SerDes and the
IOD-to-IOD links; the preset's 512 arrays at 1.247 GHz are {cost.silicon_array_scale(get_preset("mi300x"), cost.preset_system("mi300x")):.3f}× as much silicon at the
data sheet's 2.1 GHz engine clock (`ChipSystem.silicon_clock_hz`), and each IOD is at least the footprint of the XCDs
it carries. Predictions, none fitted: an XCD of {mi300x.area_per_die_mm2:.0f} mm² ({error_pct(mi300x.area_per_die_mm2, cost.MI300X_XCD_AREA_MM2):+.0f} % against ≈ {cost.MI300X_XCD_AREA_MM2:.0f}), an IOD of
{mi300x.area_per_base_die_mm2:.0f} mm² ({error_pct(mi300x.area_per_base_die_mm2, cost.MI300X_IOD_AREA_MM2):+.0f} % against ≈ {cost.MI300X_IOD_AREA_MM2:.0f}) — GA100's SIMT factor carries over to AMD's CUs — and
{mi300x.total_power_w:.0f} W against AMD's {cost.MI300X_POWER_W:.0f} W ({error_pct(mi300x.total_power_w, cost.MI300X_POWER_W):+.0f} %): **outside ±20 %**. Building the chip as it is moves its
dies, not its power: the dynamic terms follow the data sheet's rates, whatever dies carry them. What is left is the B200 signature, larger: the data sheet's peak is quoted at the 2.1 GHz
top clock, which a 750 W board limit does not sustain — the MI325X is the same silicon at the same
1,307.4 TFLOP/s peak with a 1,000 W limit (AMD Instinct MI325X data sheet, 2024) — plus a GPU core factor
measured on NVIDIA's GA100. The model is not refitted to 750 W. As a rival it runs within it
(`cost.power_capped`, the chip's DVFS: the clock whose modelled power is the board limit): at {mi300x_cap_ratio:.3f}× its
clock, {mi300x_cap_mhz:,.0f} MHz, against the median {cost.MI300X_GEMM_MEDIAN_CLOCKS_HZ["bf16"] / 1e6:,.0f} MHz AMD measured under a dense bf16 GEMM within
its 750 W (ROCm blog, "Measuring Max-Achievable FLOPs – Part 2", 2025; not fitted): {error_pct(mi300x_cap_mhz, cost.MI300X_GEMM_MEDIAN_CLOCKS_HZ["bf16"] / 1e6):+.0f} %. The voltage–frequency
exponent k = 1 gives the highest clock of its 0–1 range; the measured medians sit near its low end, so the capped
rival's rate favours the MI300X.

FP8: the TDP-like power is the same in either format — an FP8 MAC at twice the bf16 rate costs half a bf16 MAC
(`energy.FP8_MAC_PJ`, the H100's ratio at one 700 W TDP) and its 1-byte operands stream the same bytes per second —
so an FP8 datapath adds its area (`area.FP8_MAC_AREA_FACTOR`) and that area's leakage and die cost, not dynamic
power. What the model leaves out: clock tree and control power beyond the per-event energies; partial-good dies
(see below).

## Breakdowns

{breakdown_table(estimates, "area_mm2", "mm²")}

{breakdown_table(estimates, "power_w", "W")}

{breakdown_table(estimates, "cost_usd", "USD", digits=0)}

{yields}

The cost is a manufacturing cost, not a price: no published prices compare honestly, so there is no
pass/fail band. The yield counts only fully good dies; NVIDIA sells GA100 with 108 of 128 SMs and GH100
with 132 of 144 enabled, so harvesting makes the real cost per sellable die lower than modelled here.

## Sensitivity

{sensitivity}

{generations_section()}
## Sources and assumptions

* GA100 block areas from its die photo: Zhang et al., "LLMCompass: Enabling Efficient Hardware Design for
  Large Language Model Inference", ISCA 2024 (artifact `ae/figure6/real_hardware/die_area.csv`): SMs 476.25,
  crossbar 76.44, L2 119.31, HBM PHY 58.0, HBM control 31.77, NVLink PHY 20.95, other 40 mm². NVLink4 PHY
  0.965 mm² per link from the same project's cost model.
* Wafer cost: Khan & Mann, "AI Chips: What They Are and Why They Matter", CSET 2020 (N7 $9,346, N5 $16,988).
* D0: TSMC via AnandTech, 2020-08-25 (N7 0.09, N5 0.10–0.11 /cm²). α = 4: Hennessy & Patterson.
* N5 vs N7: 1.8× logic density, −30 % power at iso-speed (TSMC); SRAM bit cell 0.021 vs 0.027 µm².
  4N takes N5's figures (assumption).
* A100/H100 die area, TDP, HBM stacks, NVLink lanes: NVIDIA A100 and H100 whitepapers and datasheets.
  TPUv4: Jouppi et al., ISCA 2023 (die bound, 4 HBM stacks, ICI links; 192 W maximum chip power as quoted
  from the paper by G. Lockwood's TPUv4 notes).
* Newer nodes: TSMC N4P press release 2021-10-26 (+6 % density, +22 % power efficiency over N5); N3E at TSMC's
  2022 Technology Symposium (1.6× logic density, −34 % power over N5; SRAM bit cell unchanged at 0.021 µm²,
  IEDM 2022); N3 wafer ≈ $20,000 (DigiTimes via Tom's Hardware, 2022, analyst estimate). 4NP takes N4P's
  figures (assumption).
* Flagships: NVIDIA Blackwell technical brief, HGX B200 / DGX B200 and GB200 NVL72 datasheets (rates, HBM3e,
  NVLink5 of 18 × 100 GB/s on 200G lanes, 10 TB/s NV-HBI, 1,000 W / 1,200 W); TechInsights' HGX B200 teardown
  (2025: two reticles of silicon, "a near doubling of the GPU die area versus Hopper"); Cloud TPU v5p
  documentation (459 TFLOP/s, 95 GB HBM2e at 2,765 GB/s, 1,200 GB/s ICI, 3-D torus); AMD MI300X data sheet.
  Die-to-die: UCIe 1.0 advanced package (Das Sharma et al., IEEE Trans. CPMT 2022: 1,317 GB/s/mm, 0.5 pJ/bit).
* Assumptions (marked in the docstrings): HBM3 PHY area = HBM2e's; 200G lane area = 100G's; die-to-die depth
  1 mm; TPU v5p at N5 with 100G lanes and a 128 MiB buffer; ICI lanes = 50 Gb/s NRZ; IO/misc area
  unscaled across nodes; HBM {energy.HBM_PJ_PER_BYTE / 8:.2f} pJ/bit for HBM2 and HBM3 alike; leakage per mm²;
  HBM $/GB; package cost per mm² of interposer, HBM site footprint, interposer overhead and bond yield; SIMT power
  scales with the SIMT area factor; V ∝ f between bins of one silicon (B200).
"""


def report_parser(prog: str, doc: str) -> OneLineParser:
    """The parser of a Markdown report script: ``--write PATH`` or stdout."""
    parser = OneLineParser(prog=prog, description=doc.split("\n")[0])
    parser.add_argument("--write", metavar="PATH",
                        help="write the markdown to PATH atomically (default: print it on stdout)")
    return parser


def report_main(parser: OneLineParser, make_report, argv: list[str] | None = None) -> int:
    """Run a Markdown report script: the report written atomically to ``--write`` (an unwritable path: one line,
    exit 2) or printed."""
    args = parser.parse_args(argv)
    text = make_report()
    if args.write:
        try:
            write_text_atomic(args.write, text)
        except OSError as exc:
            print(f"{parser.prog}: error: cannot write {args.write}: {exc.strerror or exc}", file=sys.stderr)
            return 2
        print(f"wrote {args.write}")
    else:
        print_output(text)
    return 0


def build_parser() -> OneLineParser:
    return report_parser("python -m experiments.cost_table", __doc__)


def main(argv: list[str] | None = None) -> int:
    return report_main(build_parser(), report, argv)


if __name__ == "__main__":
    sys.exit(main())
