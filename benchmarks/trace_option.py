"""Where a run option travels: the files of stsim whose executed lines name it, in order.

Follows one call of ``stsim.run`` (by default the default call, ``T=200, q=3``) with
``sys.settrace`` and records every executed line of the package that names the option
``NAME`` — as a variable or parameter (``lr``), an attribute (``cfg.lr``, ``plan.lr``) or a
key (``"lr"``); comments do not count. Consecutive lines of one file are one visit; a file
visited again after the option left it is a *return*. This is the measure "``lr`` passes
through N files with R returns".

    PYTHONPATH=. python benchmarks/trace_option.py lr                 # the default call
    PYTHONPATH=. python benchmarks/trace_option.py freeze "steps=300" -v
"""
import linecache
import os
import re
import sys
import warnings

import stsim


def trace(name, **options):
    """``(visits, hits)``: the files in order of visit, and ``{(file, line): count}``."""
    pattern = re.compile(r"(?<![\w.])%s\b|\.%s\b|[\"']%s[\"']" % ((re.escape(name),) * 3))
    root = os.path.dirname(stsim.__file__)
    visits, hits = [], {}

    def local(frame, event, arg):
        if event == "line":
            code = linecache.getline(frame.f_code.co_filename, frame.f_lineno).split("#")[0]
            if pattern.search(code):
                where = os.path.relpath(frame.f_code.co_filename, root)
                hits[(where, frame.f_lineno)] = hits.get((where, frame.f_lineno), 0) + 1
                if not visits or visits[-1] != where:
                    visits.append(where)
        return local

    def on_call(frame, event, arg):
        return local if frame.f_code.co_filename.startswith(root) else None

    options = {"T": 200, "q": 3, "progress": False, **options}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        sys.settrace(on_call)
        try:
            stsim.run(**options)
        finally:
            sys.settrace(None)
    return visits, hits


def main(argv):
    name = argv[1] if len(argv) > 1 else "lr"
    options = eval(f"dict({argv[2]})") if len(argv) > 2 and argv[2] != "-v" else {}
    visits, hits = trace(name, **options)
    files = list(dict.fromkeys(visits))
    print(" -> ".join(visits))
    print(f"{name}: {len(files)} files, {len(visits) - len(files)} returns")
    if "-v" in argv:
        root = os.path.dirname(stsim.__file__)
        for (where, line), count in hits.items():
            text = linecache.getline(os.path.join(root, where), line).strip()
            print(f"  {where}:{line} x{count}: {text[:90]}")


if __name__ == "__main__":
    main(sys.argv)
