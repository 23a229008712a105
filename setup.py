"""Build of npusim's compiled core: the modules of ``npusim.engine.COMPILED`` (the engine's, the AI
core's pipes, the DMA queues, the L2, the AICPU schedulers, the machine, the ISA, the recorder,
HCCL's staging rewrite and the PyPTO runtime below the frontend) compiled to C extensions by mypyc,
from the same mypy-strict sources (the metadata is in pyproject.toml).

The network's progressive filling is most of a collective's run, the event loop runs every event
and the pipes every instruction; compiled, they run the same operations in the same order (the
same rates to the bit, the same event order) several times faster.

The build writes nothing into the source tree. mypyc's C files and its type-check cache go to the
build's temporary folder, and the extensions into their own package, ``npusim_compiled``, in the
wheel (so in site-packages, an editable install included), never beside the sources:
``npusim_compiled/engine/`` holds the extension files of ``npusim.engine`` (and the shared library),
``npusim_compiled/hw/`` those of ``npusim.hw`` (and so on for ``isa/``, ``trace/``, ``kernels/hccl/``, ``kernels/shmem/``, ``runtime/`` and
``frontend/pypto/``), and ``npusim_compiled/__init__.py`` the SHA-256 of
the sources they were compiled from (or why nothing was compiled). ``npusim.engine`` compares
those digests with the sources when it is imported and only then puts the compiled modules first
on the packages' paths (all or none); otherwise Python runs the ``.py`` files: the same code.

Without a working C compiler (and Python's headers) the build compiles nothing, says so in one
line, and installs npusim with its engine interpreted. ``pip`` shows a successful build's output
only with ``-v``; ``make`` prints the line after installing (``python -m npusim.engine``).
"""

import ast
import hashlib
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ENGINE = Path(__file__).resolve().parent / "npusim" / "engine" / "__init__.py"


def engine_constant(name: str) -> object:
    """The constant ``name`` of npusim/engine/__init__.py, read from its source: the build needs the
    list of compiled modules before npusim's dependencies are installed, so it does not import it."""
    for node in ast.parse(ENGINE.read_text()).body:
        if isinstance(node, ast.Assign) and [getattr(target, "id", None) for target in node.targets] == [name]:
            return ast.literal_eval(node.value)
    raise LookupError(f"{ENGINE} assigns no constant {name}")


COMPILED = [f"npusim/{name.replace('.', '/')}.py" for name in engine_constant("COMPILED")]
"""The modules compiled (``npusim.engine.COMPILED``), into one shared library (``compiled__mypyc``): they call each other inside it."""
PACKAGE = engine_constant("COMPILED_PACKAGE")
"""The package the build writes: a folder per package of the compiled modules (``engine/``, ``hw/``, ``isa/``, ``trace/``, ``kernels/hccl/``, ``kernels/shmem/``, ``runtime/``, ``frontend/pypto/``: their extension files) and
``__init__.py`` (the digests)."""
GROUP = "npusim.engine.compiled"
"""mypyc's name for the shared library (``npusim.engine.compiled__mypyc``; of mypyc's choosing otherwise)."""
HOW_TO_COMPILE = ("install a C compiler and Python's headers (on Debian / Ubuntu: apt-get install gcc python3-dev), then run `make` "
                  "again (or `pip install --no-deps -e .` in your environment)")


def compiler_problem(compiler: object) -> str | None:
    """Why ``compiler`` (distutils', set up as build_ext sets it up: ``$CC`` or the one Python was
    built with) cannot build an extension, in a few words; None when it compiles a file that
    includes Python.h. Its messages are kept, not printed (the build says one line)."""
    command = getattr(compiler, "compiler_so", None)
    if not command:  # not a Unix compiler (MSVC): the build itself tells
        return None
    if shutil.which(command[0]) is None:
        return f"no C compiler: {command[0]!r} (the compiler Python was built with, or $CC) is not found"
    with tempfile.TemporaryDirectory() as folder:
        probe = Path(folder, "probe.c")
        probe.write_text("#include <Python.h>\nint npusim_probe(void) { return 0; }\n")
        done = subprocess.run([*command, f"-I{sysconfig.get_paths()['include']}", "-c", str(probe), "-o", str(probe.with_suffix(".o"))],
                              capture_output=True, text=True)
    if done.returncode != 0:
        said = next((line.strip() for line in (done.stderr + done.stdout).splitlines() if "error" in line.lower()), "it failed")
        return f"the C compiler {command[0]!r} cannot build a Python extension ({said})"
    return None


def record(sources: dict[str, str], not_compiled: str | None, said: str | None) -> str:
    """The text of ``npusim_compiled/__init__.py``."""
    return ('"""npusim\'s compiled engine, written by its build (setup.py): the extension files of each package of '
            'npusim.engine.PACKAGES in its folder (npusim.engine in engine/, npusim.kernels.hccl in kernels/hccl/ ...); SOURCES, '
            'the SHA-256 of the sources (by path in the npusim package) they were compiled from; NOT_COMPILED, why nothing was '
            'compiled, and SAID, the line the build said then (npusim/engine/__init__.py reads them)."""\n\n'
            f"SOURCES = {sources!r}\nNOT_COMPILED = {not_compiled!r}\nSAID = {said!r}\n")


class BuildCompiledEngine(build_ext):
    """build_ext writing the compiled engine into the wheel's ``npusim_compiled`` package, never
    beside the sources (which an editable install's build_ext does): into the build folder of a
    wheel, or straight into the editable wheel's files."""

    written: list[str]

    def run(self) -> None:
        editable = bool(self.editable_mode)
        # an editable wheel is made of the files in install_lib (setuptools' editable_wheel); a wheel of build_lib
        package = Path(self.get_finalized_command("install").install_lib if editable else self.build_lib, PACKAGE)
        shutil.rmtree(package, ignore_errors=True)
        package.mkdir(parents=True)
        self.written = []
        self.inplace = False  # never beside the sources
        sources, not_compiled = self.compile_into(package)
        said = None
        if not_compiled is not None:
            said = f"npusim: the engine is not compiled and runs as Python (the same results, about 1.4x slower): {not_compiled}; {HOW_TO_COMPILE}"
            print(said, file=sys.stderr)
        (package / "__init__.py").write_text(record(sources, not_compiled, said))
        self.written.append(str(package / "__init__.py"))

    def compile_into(self, folder: Path) -> tuple[dict[str, str], str | None]:
        """Compile the modules of COMPILED into ``folder``, each into the folder of its package
        (``engine/``, ``hw/``, ``kernels/hccl/`` ...): the digests of their sources, and None, or no digests and why
        nothing was compiled."""
        from distutils.ccompiler import new_compiler
        from distutils.errors import CCompilerError, DistutilsError
        from distutils.sysconfig import customize_compiler

        compiler = new_compiler(compiler=self.compiler)
        customize_compiler(compiler)
        problem = compiler_problem(compiler)
        if problem is not None:
            return {}, problem
        from mypyc.build import mypycify

        sources = {str(Path(name).relative_to("npusim")): hashlib.sha256(Path(name).read_bytes()).hexdigest() for name in COMPILED}
        temp = Path(self.build_temp).resolve()
        # checked against the project's mypy settings (pyproject.toml), which name modules other than these; the modules they
        # import but which are not compiled (the frontend's tensors, compute ...) are read for their types, their own errors
        # not reported (follow-imports=silent: `make lint` checks them); mypy's cache and mypyc's C files in the build's
        # temporary folder
        self.distribution.ext_modules = mypycify(["--no-warn-unused-configs", "--follow-imports=silent", f"--cache-dir={temp / 'mypy-cache'}",
                                                  *COMPILED],
                                                 opt_level="3", group_name=GROUP, target_dir=str(temp / "mypyc"))
        # setuptools' own build_ext, set up for mypyc's extensions: it compiles in the temporary folder and links there (lib),
        # then they are moved into the package
        compile_c = build_ext(self.distribution)
        compile_c.build_lib, compile_c.build_temp, compile_c.compiler = str(temp / "lib"), str(temp / "c"), self.compiler
        try:
            compile_c.ensure_finalized()
            compile_c.run()
        except (CCompilerError, DistutilsError) as error:
            return {}, f"the C build failed ({str(error).strip() or type(error).__name__})"
        for extension in compile_c.extensions:  # npusim.<package>.<module>, the package perhaps a subpackage (kernels.hccl)
            made = temp / "lib" / compile_c.get_ext_filename(extension.name)
            into = folder.joinpath(*extension.name.split(".")[1:-1])
            into.mkdir(parents=True, exist_ok=True)
            shutil.move(made, into / made.name)
            self.written.append(str(into / made.name))
        return sources, None

    def get_outputs(self) -> list[str]:
        return list(getattr(self, "written", []))


# the extensions are made by mypyc as the build runs (BuildCompiledEngine): this one stands for them, so that setuptools runs
# build_ext and tags the wheel for this platform
setup(ext_modules=[Extension(f"{GROUP}__mypyc", sources=[])], cmdclass={"build_ext": BuildCompiledEngine})
