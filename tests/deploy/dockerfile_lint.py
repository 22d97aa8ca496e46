#!/usr/bin/env python3
"""Checks Dockerfiles for the mistakes a build would only show on a machine
that can run it (the GPU image cannot be built here): unknown instructions,
a COPY --from of a stage not defined before, a COPY source missing from the
build context, a ${VARIABLE} outside RUN that no ARG or ENV in scope defines,
and exec forms (CMD, ENTRYPOINT, HEALTHCHECK, RUN [...]) that are not JSON
arrays of strings.

  dockerfile_lint.py CONTEXT DOCKERFILE...   # exit 1 and one line per problem
  dockerfile_lint.py --self-test             # proves each check catches its mistake
"""
import json
import os
import re
import sys
import tempfile

INSTRUCTIONS = {"FROM", "ARG", "ENV", "RUN", "COPY", "ADD", "WORKDIR", "USER", "LABEL",
                "EXPOSE", "VOLUME", "CMD", "ENTRYPOINT", "HEALTHCHECK", "SHELL",
                "STOPSIGNAL", "ONBUILD"}
# Set by the builder in every stage.
PREDEFINED = {"PATH", "HOME", "TARGETPLATFORM", "TARGETARCH", "TARGETOS", "BUILDPLATFORM"}


def logical_lines(text):
    """(line number, instruction line) with continuations joined."""
    pending, start = "", 0
    for number, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        if not pending and (not stripped or stripped.startswith("#")):
            continue
        if pending and stripped.startswith("#"):
            continue
        if not pending:
            start = number
        if stripped.endswith("\\"):
            pending += stripped[:-1] + " "
            continue
        yield start, pending + stripped
        pending = ""
    if pending:
        yield start, pending


def variables(text):
    """The names of the $NAME and ${NAME} (also ${NAME:-default}) in text."""
    return {braced or bare for braced, bare in
            re.findall(r"\$\{(\w+)(?::[-+][^}]*)?\}|\$(\w+)", text)}


def check_exec_form(arguments):
    if not arguments.startswith("["):
        return None
    try:
        value = json.loads(arguments)
    except json.JSONDecodeError as error:
        return f"exec form is not valid JSON ({error.msg})"
    if not all(isinstance(item, str) for item in value):
        return "exec form must be an array of strings"
    return None


def lint(context, path):
    problems = []
    with open(path) as handle:
        text = handle.read()
    global_args, stages, scope, in_stage = set(), [], set(), False
    for number, line in logical_lines(text):
        where = f"{path}:{number}"
        instruction, _, arguments = line.partition(" ")
        instruction, arguments = instruction.upper(), arguments.strip()
        if instruction not in INSTRUCTIONS:
            problems.append(f"{where}: unknown instruction {instruction}")
            continue
        if instruction != "RUN" or not arguments.startswith("["):
            known = (scope | PREDEFINED) if in_stage else global_args
            if instruction not in ("RUN", "HEALTHCHECK", "CMD", "ENTRYPOINT"):
                for name in variables(arguments) - known:
                    problems.append(f"{where}: ${{{name}}} is not defined by an ARG or ENV in scope")
        if instruction == "FROM":
            words = arguments.split()
            if len(words) >= 3 and words[-2].upper() == "AS":
                stages.append(words[-1])
            in_stage, scope = True, set()
        elif instruction == "ARG":
            name = arguments.split("=", 1)[0].strip()
            (scope if in_stage else global_args).add(name)
        elif instruction == "ENV":
            scope.update(re.findall(r"(?:^|\s)(\w+)=", arguments))
        elif instruction in ("COPY", "ADD"):
            words = arguments.split()
            options = [w for w in words if w.startswith("--")]
            sources = [w for w in words if not w.startswith("--")][:-1]
            source_stage = next((o.split("=", 1)[1] for o in options
                                 if o.startswith("--from=")), None)
            if source_stage is not None:
                if source_stage not in stages:
                    problems.append(f"{where}: --from={source_stage} names no earlier stage")
            else:
                for source in sources:
                    if not any(ch in source for ch in "*?[") and not os.path.exists(
                            os.path.join(context, source)):
                        problems.append(f"{where}: {source} is not in the build context")
        elif instruction in ("CMD", "ENTRYPOINT", "RUN"):
            problem = check_exec_form(arguments)
            if problem:
                problems.append(f"{where}: {instruction} {problem}")
        elif instruction == "HEALTHCHECK" and arguments != "NONE":
            command = re.sub(r"^(--\S+\s+)*", "", arguments)
            if not command.startswith("CMD "):
                problems.append(f"{where}: HEALTHCHECK needs CMD or NONE")
            else:
                problem = check_exec_form(command[4:].strip())
                if problem:
                    problems.append(f"{where}: HEALTHCHECK {problem}")
    if not stages and "FROM" not in text:
        problems.append(f"{path}: no FROM")
    return problems


BROKEN = {
    "unknown instruction": "FROM debian:12\nRUNN true\n",
    "names no earlier stage": "FROM debian:12\nCOPY --from=builder /a /b\n",
    "not in the build context": "FROM debian:12\nCOPY no-such-file /x\n",
    "not defined by an ARG": "FROM debian:12\nLABEL version=${VERSION}\n",
    "not valid JSON": 'FROM debian:12\nCMD ["chimera", "--help"\n',
    "HEALTHCHECK needs CMD": "FROM debian:12\nHEALTHCHECK --interval=5s chimera health\n",
}


def self_test():
    failures = 0
    with tempfile.TemporaryDirectory() as folder:
        for expected, text in BROKEN.items():
            path = os.path.join(folder, "Dockerfile")
            with open(path, "w") as out:
                out.write(text)
            problems = lint(folder, path)
            if not any(expected in p for p in problems):
                print(f"not caught: {expected!r} in {text!r} (got {problems})")
                failures += 1
    print(f"{len(BROKEN) - failures} of {len(BROKEN)} broken Dockerfiles caught")
    return 1 if failures else 0


def main():
    if sys.argv[1:] == ["--self-test"]:
        return self_test()
    if len(sys.argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    problems = [p for path in sys.argv[2:] for p in lint(sys.argv[1], path)]
    for problem in problems:
        print(problem)
    print(f"{len(sys.argv) - 2} Dockerfiles, {len(problems)} problems")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
