"""The test suite's Python, started once: imports torch, transformers and the reference models'
modules, then runs each script a test asks for in a child forked from it.

The references (tools/reference/*.py, the tests' inline checks) are short; most of a call's time
was the import of torch and transformers, 4 to 8 CPU seconds, paid some hundred times a suite.
A child is a fresh copy of this process: its own memory, the caller's working directory,
environment, stdin, stdout and stderr (passed over the socket), `__main__` and `sys.argv` as
`python3 SCRIPT ARGS` would set them, and its exit status returned. The parent runs no tensor
operation, so no thread pool exists to be lost in a fork.

A call is declined (tests/python/client.py then runs the real interpreter) where the preloaded
modules could differ from a fresh start's: an option other than a script, `-` or `-c`, or a
variable read at import (OMP_, MKL_, ATEN_, TORCH_, PYTHON...) that differs from this process's.

    server.py SOCKET    listens on SOCKET until SIGTERM
"""
import importlib.machinery
import json
import os
import selectors
import signal
import socket
import struct
import sys
import traceback
import types
import warnings

# What the references import: once transformers' llama is in, the other families cost milliseconds.
PRELOAD = ["torch", "numpy", "safetensors.torch", "transformers", "tokenizers", "sentencepiece", "tiktoken",
           "PIL.Image", "torchao", "peft", "trl"] + [
    f"transformers.models.{name}.modeling_{name}"
    for name in ("llama", "qwen2", "qwen3", "qwen3_moe", "mixtral", "deepseek_v3", "gpt_oss", "bert", "t5", "vit",
                 "clip", "llava")]
IMPORT_TIME_PREFIXES = ("OMP_", "MKL_", "KMP_", "ATEN_", "TORCH_", "PYTORCH_", "PYTHON", "CUDA_", "OPENBLAS_",
                        "LD_", "HF_", "TRANSFORMERS_", "TOKENIZERS_")


def import_time_environment(environment):
    return {k: v for k, v in environment.items() if k.startswith(IMPORT_TIME_PREFIXES)}


def split_options(argv):
    """(warning options, the rest) of `python3 [-W ARG ...] ...`."""
    warnings_options = []
    while len(argv) >= 2 and argv[0] == "-W":
        warnings_options.append(argv[1])
        argv = argv[2:]
    return warnings_options, argv


def script_of(argv):
    """(kind, source, script argv) for `python3 [-W ARG ...] [SCRIPT | - | -c CODE] ARGS`, or None."""
    argv = split_options(argv)[1]
    if not argv:
        return None
    if argv[0] == "-c" and len(argv) >= 2:
        return "code", argv[1], ["-c"] + argv[2:]
    if argv[0] == "-":
        return "stdin", None, argv
    if argv[0].startswith("-"):
        return None
    return "file", argv[0], argv


def run_child(request):
    """In the forked child: becomes `python3 ARGV` and never returns."""
    code = 1
    try:
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        warnings_options, _ = split_options(request["argv"])
        if warnings_options:
            sys.warnoptions[:] = warnings_options
            warnings._processoptions(warnings_options)
        kind, source, argv = script_of(request["argv"])
        if kind == "file":
            path = source
            with open(path, "rb") as file:
                text = file.read()
            sys.path[0] = os.path.dirname(os.path.abspath(path))
        elif kind == "stdin":
            path, text = "<stdin>", sys.stdin.read()
            sys.path[0] = ""
        else:
            path, text = "<string>", source
            sys.path[0] = ""
        sys.argv = argv
        main = types.ModuleType("__main__")
        main.__dict__.update(__builtins__=__builtins__, __annotations__={}, __package__=None, __spec__=None,
                             __loader__=importlib.machinery.BuiltinImporter)
        if kind == "file":
            main.__file__ = os.path.abspath(path)
            main.__loader__ = importlib.machinery.SourceFileLoader("__main__", main.__file__)
        if kind != "code":
            main.__cached__ = None
        if kind == "stdin":
            main.__file__ = "<stdin>"
        sys.modules["__main__"] = main
        exec(compile(text, path, "exec"), main.__dict__)
        code = 0
    except SystemExit as exit_request:
        code = exit_request.code
        if code is None:
            code = 0
        elif not isinstance(code, int):
            print(code, file=sys.stderr)
            code = 1
    except BaseException as error:  # noqa: B036 - printed as the interpreter would, then exit 1
        trace = error.__traceback__
        while trace is not None and trace.tb_frame.f_code is run_child.__code__:
            trace = trace.tb_next  # from the script's first frame
        traceback.print_exception(type(error), error, trace)
        code = 1
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:  # noqa: BLE001 - a closed pipe must not change the exit status
                pass
        os._exit(code & 0xFF)


def receive_exactly(connection, data, size):
    """`data` read on from `connection` to `size` bytes."""
    while len(data) < size:
        more = connection.recv(size - len(data))
        if not more:
            raise ConnectionError("caller closed the connection")
        data += more
    return data


def receive_request(connection):
    """The caller's request and its three descriptors (stdin, stdout, stderr)."""
    header, fds, _, _ = socket.recv_fds(connection, 8, 3)
    size = struct.unpack("<Q", receive_exactly(connection, header, 8))[0]
    body = receive_exactly(connection, b"", size)
    if len(fds) != 3:
        raise ConnectionError(f"{len(fds)} descriptors, expected 3")
    return json.loads(body), fds


def serve(path):
    for name in PRELOAD:
        try:
            __import__(name)
        except Exception as error:  # noqa: BLE001 - a missing module is imported by the child
            print(f"python server: {name} not preloaded: {error}", file=sys.stderr)
    preloaded = import_time_environment(os.environ)
    sys.stdout.flush()
    sys.stderr.flush()
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    if os.path.exists(path):
        os.unlink(path)
    listener.bind(path + ".new")  # appears whole, once it accepts
    listener.listen(64)
    os.rename(path + ".new", path)
    selector = selectors.DefaultSelector()
    selector.register(listener, selectors.EVENT_READ)
    children = {}  # pid -> connection
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(True))
    # A child's end (SIGCHLD) wakes the select through this pipe: its caller waits on the reply.
    wake_read, wake_write = os.pipe()
    os.set_blocking(wake_write, False)
    signal.set_wakeup_fd(wake_write)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    selector.register(wake_read, selectors.EVENT_READ)
    while not stop:
        for key, _ in selector.select(timeout=5):
            if key.fileobj == wake_read:
                os.read(wake_read, 512)
            elif key.fileobj is listener:
                connection, _ = listener.accept()
                try:
                    request, fds = receive_request(connection)
                except (ConnectionError, OSError, ValueError):
                    connection.close()
                    continue
                if script_of(request["argv"]) is None or import_time_environment(request["env"]) != preloaded:
                    connection.sendall(b"declined\n")
                    connection.close()
                    for fd in fds:
                        os.close(fd)
                    continue
                pid = os.fork()
                if pid == 0:
                    signal.set_wakeup_fd(-1)
                    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
                    signal.signal(signal.SIGTERM, signal.SIG_DFL)
                    selector.close()
                    listener.close()
                    connection.close()
                    os.close(wake_read)
                    os.close(wake_write)
                    for target, fd in enumerate(fds):
                        os.dup2(fd, target)
                        os.close(fd)
                    run_child(request)
                for fd in fds:
                    os.close(fd)
                children[pid] = connection
                selector.register(connection, selectors.EVENT_READ, pid)
            else:  # a caller gone (killed by its test's timeout): its child goes too
                os.kill(key.data, signal.SIGKILL)
        while children:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break
            connection = children.pop(pid)
            selector.unregister(connection)
            code = os.waitstatus_to_exitcode(status)
            try:
                connection.sendall(f"exit {code}\n".encode())
            except OSError:
                pass
            connection.close()
    for pid in children:
        os.kill(pid, signal.SIGKILL)
    os.unlink(path)


if __name__ == "__main__":
    serve(sys.argv[1])
