# The program the sandbox runs: reads {code, function, args, requirements}
# as JSON on stdin, writes one JSON result on the original stdout. Whatever
# the tool prints goes to stderr (bounded and discarded by the server).
import asyncio, importlib.util, json, os, re, sys

ALIASES = {"pillow": "PIL", "beautifulsoup4": "bs4", "scikit_learn": "sklearn",
           "pyyaml": "yaml", "python_dateutil": "dateutil", "opencv_python": "cv2"}

def module_of(requirement):
    name = re.split(r"[<>=!~;\[ ]", requirement.strip(), 1)[0].lower().replace("-", "_").replace(".", "_")
    return ALIASES.get(name, name)

def main():
    result = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    def emit(obj):
        result.write(json.dumps(obj))
        result.flush()
    request = json.loads(sys.stdin.read())
    missing = [r for r in request["requirements"] if importlib.util.find_spec(module_of(r)) is None]
    if missing:
        return emit({"status": "requirement_missing", "missing": missing})
    namespace = {"__name__": "__tool__"}
    try:
        exec(compile(request["code"], "<tool>", "exec"), namespace)
        function = namespace.get(request["function"])
        if not callable(function):
            return emit({"status": "error", "message": "the code defines no function %r" % request["function"]})
        value = function(**request["args"])
        if asyncio.iscoroutine(value):
            value = asyncio.run(value)
    except MemoryError:
        return emit({"status": "memory"})
    except BaseException as e:
        return emit({"status": "error", "message": ("%s: %s" % (type(e).__name__, e))[:2000]})
    try:
        text = json.dumps(value)
    except (TypeError, ValueError) as e:
        return emit({"status": "bad_output", "message": str(e)[:500]})
    result.write('{"status":"ok","output":' + text + "}")
    result.flush()

main()
