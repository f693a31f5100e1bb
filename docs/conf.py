"""Sphinx configuration of zonal's documentation site (``make docs``)."""

from __future__ import annotations

import os
import re
import warnings
from importlib.metadata import version as package_version

from sphinx.application import Sphinx

project = "zonal"
author = "zonal contributors"
copyright = "zonal contributors"
release = package_version("zonal")
version = release

extensions = [
    "myst_parser",
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.napoleon",
    "sphinx_autodoc_typehints",
    "sphinx.ext.mathjax",
    "sphinx_gallery.gen_gallery",
    # MathJax shipped with the site (the docs build and the browser check run offline)
    "sphinx-mathjax-offline",
]

source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
root_doc = "index"
exclude_patterns = ["_build", "Thumbs.db", ".DS_Store", "tutorials/README.txt"]

myst_enable_extensions = ["dollarmath", "amsmath", "colon_fence", "deflist"]
myst_heading_anchors = 3

autodoc_default_options = {
    "members": True,
    "show-inheritance": True,
    # scikit-learn's generated metadata-routing setters carry scikit-learn's own cross-references
    "exclude-members": "set_fit_request,set_predict_request,set_score_request",
}
autodoc_member_order = "bysource"
autodoc_typehints = "description"
autodoc_inherit_docstrings = False
autosummary_generate = False
napoleon_google_docstring = True
napoleon_numpy_docstring = False
typehints_fully_qualified = False
always_document_param_types = False
# the API pages document names the way their modules export them; annotations that name types of
# torch, GPyTorch or BoTorch cannot be cross-referenced offline (no intersphinx inventories)
nitpicky = False


sphinx_gallery_conf = {
    "examples_dirs": "tutorials",
    "gallery_dirs": "auto_tutorials",
    "filename_pattern": r"/plot_",
    "within_subsection_order": "FileNameSortKey",
    "download_all_examples": False,
    "remove_config_comments": True,
    "abort_on_example_error": True,
    "only_warn_on_example_error": False,
    "matplotlib_animations": False,
    "show_memory": False,
}
# sphinx-autodoc-typehints calls an API that Sphinx 10 removes, once per docstring
warnings.filterwarnings("ignore", message=".*_RstSnippetParser.set_application.*")
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("MPLBACKEND", "Agg")

html_theme = "furo"
html_title = f"zonal {release}"
html_static_path: list[str] = []

_LITERAL = re.compile(r"(``[^`]+``|`[^`]+`)")
_SHAPE_STAR = re.compile(r"(?<!\*)\*(?=\w+(?![\w*]))")
_BAR = re.compile(r"(?<!\\)\|")


def _plain_shapes(
    app: Sphinx, what: str, name: str, obj: object, options: object, lines: list[str]
) -> None:
    """Docstrings write tensor shapes as ``[*b, q, D]`` and norms as ``|x|`` outside literals, and
    plurals as ``Model``\\ s; reStructuredText reads the first as emphasis, the second as a
    substitution and rejects the third. Escape all three, leaving the docstrings as written."""
    for index, line in enumerate(lines):
        parts = _LITERAL.split(line)
        for position in range(0, len(parts), 2):
            text = _BAR.sub(r"\\|", _SHAPE_STAR.sub(r"\\*", parts[position]))
            if position > 0 and text[:1].isalnum():
                text = "\\ " + text
            parts[position] = text
        lines[index] = "".join(parts)


def setup(app: Sphinx) -> None:
    app.connect("autodoc-process-docstring", _plain_shapes, priority=100)
