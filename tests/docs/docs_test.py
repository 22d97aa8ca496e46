#!/usr/bin/env python3
"""The docs name only flags and job fields that exist.

  docs_test.py flags SOURCE_DIR BIN_DIR   every --flag in README.md, docs/ and
                                          deploy/ is one of our programs' (their
                                          --help), our scripts' or benchmarks',
                                          or of a named foreign tool
  docs_test.py fields SOURCE_DIR          every spec.x.y path is a field of the
                                          TrainJob in proto/chimera/v1/job.proto
  docs_test.py self-test SOURCE_DIR BIN_DIR
                                          both checks catch a made-up flag and a
                                          made-up field

Exit 0 when all is well, 1 listing each unknown name with the files it is in.
"""
import glob
import os
import re
import subprocess
import sys

FLAG = re.compile(r"(?<![\w-])--[a-z][a-z0-9-]+")
FIELD = re.compile(r"\bspec(?:\.[a-zA-Z]+)+")

# Flags the docs give to other programs, with the program.
FOREIGN_FLAGS = {
    "--build-arg": "podman build",
    "--volume": "podman build",
    "--from-literal": "kubectl create secret",
    "--replicas": "kubectl scale",
    "--short": "git rev-parse",
    "--variant": "debootstrap",
    "--gtest": "GoogleTest's --gtest_filter",
}


def doc_files(source):
    files = [os.path.join(source, "README.md")]
    files += glob.glob(os.path.join(source, "docs", "*.md"))
    files += glob.glob(os.path.join(source, "deploy", "**", "*.md"), recursive=True)
    return sorted(files)


def help_text(args):
    done = subprocess.run(args, capture_output=True, text=True, timeout=60)
    return done.stdout + done.stderr


def known_flags(source, bin_dir):
    chimera = os.path.join(bin_dir, "chimera")
    top = help_text([chimera, "--help"])
    texts = [top]
    commands = re.findall(r"^  ([a-z]+)\s", top.split("SUBCOMMANDS:")[-1], re.M)
    if not commands:
        sys.exit("docs_test: no commands in 'chimera --help'")
    texts += [help_text([chimera, command, "--help"]) for command in commands]
    for daemon in ("chimera-coordinator", "chimera-worker"):
        binary = os.path.join(bin_dir, daemon)
        top = help_text([binary, "--help"])
        texts.append(top)
        # chimera-worker's modes are subcommands, each with flags of its own.
        if "Subcommands:" in top:
            for command in re.findall(r"^  ([a-z-]+)\s", top.split("Subcommands:")[-1], re.M):
                texts.append(help_text([binary, command, "--help"]))
    # Our scripts and benchmarks take flags of their own.
    for path in glob.glob(os.path.join(source, "scripts", "*")) + glob.glob(
            os.path.join(source, "bench", "*.cc")) + glob.glob(
            os.path.join(source, "deploy", "docker", "*")):
        if os.path.isfile(path):
            texts.append(open(path, errors="replace").read())
    return set(FLAG.findall("\n".join(texts)))


def unknown_flags(files, known):
    found = {}
    for path in files:
        for flag in FLAG.findall(open(path).read()):
            if flag not in known and flag not in FOREIGN_FLAGS:
                found.setdefault(flag, set()).add(path)
    return found


def proto_messages(source):
    """{message: {jsonName: type}} of job.proto's messages."""
    text = open(os.path.join(source, "proto", "chimera", "v1", "job.proto")).read()
    text = re.sub(r"//[^\n]*", "", text)
    messages = {}
    for name, body in re.findall(r"message\s+(\w+)\s*\{([^{}]*)\}", text):
        fields = {}
        for kind, field in re.findall(r"(?:repeated\s+)?([\w.<>, ]+?)\s+(\w+)\s*=\s*\d+", body):
            camel = re.sub(r"_([a-z0-9])", lambda m: m.group(1).upper(), field)
            fields[camel] = kind.split(",")[-1].strip(" >")
        messages[name] = fields
    return messages


def unknown_fields(files, messages):
    found = {}
    for path in files:
        text = open(path).read()
        for match in FIELD.finditer(text):
            # An error message quoted in the docs names a field that is wrong.
            if text[match.end():match.end() + 15].startswith(": unknown field"):
                continue
            message = "JobSpec"
            for part in match.group(0).split(".")[1:]:
                fields = messages.get(message, {})
                if part not in fields:
                    found.setdefault(match.group(0), set()).add(path)
                    break
                message = fields[part]
    return found


def report(kind, found):
    for name in sorted(found):
        print(f"{kind} {name} does not exist; named in {', '.join(sorted(found[name]))}")
    return 1 if found else 0


def main():
    mode, source = sys.argv[1], sys.argv[2]
    files = doc_files(source)
    if mode == "flags":
        return report("flag", unknown_flags(files, known_flags(source, sys.argv[3])))
    if mode == "fields":
        return report("field", unknown_fields(files, proto_messages(source)))
    if mode == "self-test":
        import tempfile
        with tempfile.NamedTemporaryFile("w", suffix=".md") as bogus:
            bogus.write("Run `chimera submit --no-such-flag` with `spec.model.noSuchField`.\n")
            bogus.flush()
            flags = unknown_flags([bogus.name], known_flags(source, sys.argv[3]))
            fields = unknown_fields([bogus.name], proto_messages(source))
        if "--no-such-flag" not in flags or "spec.model.noSuchField" not in fields:
            print(f"the checks missed a made-up name: flags {flags}, fields {fields}")
            return 1
        if unknown_fields(files, proto_messages(source)).get("spec.model.hiddenSize"):
            print("the field check refuses a real field")
            return 1
        return 0
    sys.exit(f"docs_test: unknown mode {mode!r}")


if __name__ == "__main__":
    sys.exit(main())
