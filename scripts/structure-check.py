#!/usr/bin/env python3
"""The structure check tunepar owns (issue 32): the size and include rules of the source tree.

Rules, over the .h, .cc and .cu files of the module folders (base/, search/, runner/ with
runner/core/, store/, tuner/, each searched recursively):
  1. no function longer than 80 lines and no source file longer than 800 lines; in bench/ and
     tests/ these are reported as warnings and do not fail;
  2. no include loop between files: a file pair (x.h and x.cc, or x.cu) is one node "dir/x",
     with an edge for every `#include "..."` of one of its files that names another node's file;
  3. no include loop between folders (base, search, runner, runner/core, store, tuner and any
     sub-folder; a folder's includes of itself do not count);
  4. the modules' include rules (../shared/design.md, "Module rules", and each module's README;
     MODULE_RULES below names the source of each): search/ includes nothing of runner/, store/,
     tuner/; runner/ (runner/core/ too) and store/ never include tuner/, nor each other, nor
     search/; base/ includes none of the others; no module includes tests/ or bench/ (test seams
     such as tests/support/ stay out of production code). The include graphs of rules 2 and 3
     cover bench/ and tests/ too.
Exceptions are explicit: ALLOWANCES below, each with its reason (none today).

A function is a brace block at namespace or class scope whose header (the declaration from the
end of the previous one) ends in a parameter list `)`, perhaps followed by const, noexcept,
override, final, `-> type`, a member initialiser list or `try`; its length runs from the first
line of that header (template<...> included) to the closing brace. Lambdas and local classes
inside a function are part of it; a lambda outside any function (in a namespace-scope table, in
a macro's arguments) is measured as a function of its own. Comments, string and character
literals (raw strings too) and preprocessor lines are blanked before braces are matched; each
branch of an #if is scanned as written. Nothing is skipped silently: a file whose braces do not
balance, or a block at namespace scope that is neither a function, a class, a namespace nor a
variable's braces, is itself reported.

Usage: python3 scripts/structure-check.py [--root DIR] [--verbose] [--self-test]
  --root DIR   the source tree (default: this script's repository)
  --verbose    also print the 5 longest functions and the 5 longest files of the module folders,
               the folder graph, and includes that name no file of the tree (system headers)
  --self-test  check the checker: scan small embedded fixtures (each rule broken once on purpose,
               and C++ that trips naive scanners) and compare with what is expected
Exit codes: 0 every rule holds (one summary line); 1 a rule is broken (one line per violation,
naming the file, function, loop or include); 2 bad usage, or the self-test failed.
"""
import argparse
import os
import re
import sys
import tempfile

MAX_FUNCTION_LINES = 80
MAX_FILE_LINES = 800
# Folders whose sizes fail the check, and folders whose sizes are only reported.
STRICT_DIRS = ("base", "search", "runner", "store", "tuner")
REPORTED_DIRS = ("bench", "tests")
SOURCE_EXTENSIONS = (".h", ".cc", ".cu")

# (module, forbidden module, where the rule is written). A module is a file's first folder.
MODULE_RULES = [
    ("search", "runner", "design.md: search includes nothing of the others"),
    ("search", "store", "design.md: search includes nothing of the others"),
    ("search", "tuner", "design.md: search includes nothing of the others"),
    ("runner", "tuner", "design.md: runner never includes tuner"),
    ("store", "tuner", "design.md: store never includes tuner"),
    ("base", "search", "design.md: base is the shared vocabulary every module includes"),
    ("base", "runner", "design.md: base is the shared vocabulary every module includes"),
    ("base", "store", "design.md: base is the shared vocabulary every module includes"),
    ("base", "tuner", "design.md: base is the shared vocabulary every module includes"),
    ("runner", "search", "runner/README.md: must not include search/"),
    ("runner", "store", "runner/README.md: must not include store/"),
    ("store", "search", "store/README.md: must not include search/"),
    ("store", "runner", "store/README.md: must not include runner/"),
] + [(module, test_folder, "test code (tests/support/ seams, bench/) stays out of production code")
     for module in STRICT_DIRS for test_folder in REPORTED_DIRS] + [
    # tuner/'s rooms, along the arrows of tuner/README.md: cli -> loops -> output -> study, and
    # backends on its own (CMake's libraries catch calls against the arrows, this a header-only include).
    (f"tuner/{room}", f"tuner/{forbidden}", "tuner/README.md: the rooms' arrows")
    for room, forbidden_rooms in (("study", ("cli", "loops", "output", "backends")),
                                  ("backends", ("cli", "loops", "output", "study")),
                                  ("output", ("cli", "loops", "backends")),
                                  ("loops", ("cli",)))
    for forbidden in forbidden_rooms]

# Explicit exceptions, each with its reason: {("function", "path", "name") or ("file", "path"):
# "why"}. An allowance that matches nothing is itself reported, so none outlives its cause.
ALLOWANCES = {}


# ---- Lexing: comments, literals and preprocessor lines blanked, line structure kept.

def _blank(text):
    return "".join("\n" if c == "\n" else " " for c in text)


_RAW_STRING_START = re.compile(r'(?:u8|u|U|L)?R"([^()\\\s]{0,16})\(')


def strip_source(text):
    """Returns (without_comments, code): both as long as `text`, line for line. without_comments
    keeps literals and preprocessor lines (for reading #include); code blanks those too (for
    matching braces)."""
    no_comments, code = [], []
    i, at_line_start = 0, True  # only whitespace since the last newline: a # there is a directive
    while i < len(text):
        end, kind = _piece(text, i, at_line_start)
        piece = text[i:end]
        if kind == "comment":
            no_comments.append(_blank(piece))
        elif kind == "directive":
            no_comments.append(re.sub(r"/\*.*?\*/", lambda m: _blank(m.group(0)), piece, flags=re.S))
        else:
            no_comments.append(piece)
        code.append(piece if kind == "code" else _blank(piece))
        if kind == "code" and piece == "\n":
            at_line_start = True
        elif kind != "comment" and not piece.isspace():
            at_line_start = False
        i = end
    return "".join(no_comments), "".join(code)


def _piece(text, i, at_line_start):
    """(end, kind) of what starts at text[i]: a comment, a preprocessor directive (to the end of
    its line, continuation lines included, a // comment after it excluded), a string or character
    literal (raw strings too), or one character of code."""
    n, c = len(text), text[i]
    if text.startswith("//", i):
        j = i
        while j < n and text[j] != "\n":
            j += 2 if text.startswith("\\\n", j) else 1
        return j, "comment"
    if text.startswith("/*", i):
        j = text.find("*/", i + 2)
        return (n if j < 0 else j + 2), "comment"
    if c == "#" and at_line_start:
        j = i
        while j < n and text[j] != "\n" and not text.startswith("//", j):
            if text.startswith("/*", j):
                k = text.find("*/", j + 2)
                j = n if k < 0 else k + 2
            else:
                j += 2 if text.startswith("\\\n", j) else 1
        return j, "directive"
    raw = _RAW_STRING_START.match(text, i) if c in "uULR" else None
    if raw and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
        end = text.find(")" + raw.group(1) + '"', raw.end())
        return (n if end < 0 else end + len(raw.group(1)) + 2), "literal"
    if c == '"' or (c == "'" and not _digit_separator(text, i)):
        j = i + 1
        while j < n and text[j] != c and text[j] != "\n":
            j += 2 if text[j] == "\\" else 1
        return min(j + 1, n), "literal"
    return i + 1, "code"


def _digit_separator(text, i):
    """A ' between digits (1'000'000) separates digits; it starts no character literal."""
    return i > 0 and text[i - 1].isalnum() and i + 1 < len(text) and text[i + 1].isalnum() and \
        re.search(r"\b(?:0[xXbB])?[0-9][0-9a-fA-F']*$", text[max(0, i - 40):i]) is not None


# ---- Tokens and functions.

_TOKEN = re.compile(r"""
    (?P<id>[A-Za-z_][A-Za-z_0-9]*)
  | (?P<num>\.?[0-9](?:[0-9A-Za-z_.']|[eEpP][+-])*)
  | (?P<punct>::|->|\.\.\.|&&|\|\||<<=|>>=|[-+*/%&|^!=<>]=|<<|>>|\+\+|--|[{}()\[\];:,.<>=+\-*/%&|^!~?\#@$\\])
""", re.X)

_OPERATOR_SYMBOLS = {"=", "==", "!=", "<", ">", "<=", ">=", "+", "-", "*", "/", "%", "&", "|",
                     "^", "!", "~", "<<", ">>", "+=", "-=", "*=", "/=", "%=", "&=", "|=", "^=",
                     "<<=", ">>=", "&&", "||", "++", "--", ",", "->", "[", "]", "(", ")"}
_SUFFIX_WORDS = {"const", "volatile", "noexcept", "override", "final", "mutable", "try", "&", "&&",
                 "throw", "__attribute__"}
_SUFFIX_WITH_ARGUMENTS = {"noexcept", "throw", "__attribute__"}
_NOT_A_NAME = {"decltype", "noexcept", "alignas", "__attribute__", "__declspec", "throw", "sizeof",
               "requires", "static_assert", "if", "for", "while", "switch", "return"}


class Token:
    __slots__ = ("text", "line")

    def __init__(self, text, line):
        self.text, self.line = text, line

    def __repr__(self):
        return f"{self.text}@{self.line}"


def tokenize(code):
    tokens, line, pos = [], 1, 0
    for m in _TOKEN.finditer(code):
        line += code.count("\n", pos, m.start())
        pos = m.start()
        tokens.append(Token(m.group(0), line))
    return _merge_operator_names(tokens)


def _merge_operator_names(tokens):
    """`operator` and the symbol after it (operator=, operator(), operator[], operator new) become
    one name token, so that their parentheses and = do not read as a parameter list or an
    initialiser."""
    out, i = [], 0
    while i < len(tokens):
        t = tokens[i]
        if t.text == "operator" and i + 1 < len(tokens):
            j = i + 1
            if tokens[j].text in ("(", "[") and j + 1 < len(tokens) and tokens[j + 1].text in (")", "]"):
                j += 2
            elif tokens[j].text in _OPERATOR_SYMBOLS or tokens[j].text in ("new", "delete"):
                j += 1
                if tokens[j - 1].text in ("new", "delete") and j + 1 < len(tokens) and tokens[j].text == "[":
                    j += 2
            else:  # a conversion operator: operator bool, operator const char*
                while j < len(tokens) and tokens[j].text != "(":
                    j += 1
            out.append(Token("operator" + "".join(x.text for x in tokens[i + 1:j]), t.line))
            i = j
            continue
        out.append(t)
        i += 1
    return out


class Function:
    __slots__ = ("path", "name", "start", "end", "strict")

    def __init__(self, path, name, start, end):
        self.path, self.name, self.start, self.end = path, name, start, end
        self.strict = True

    @property
    def lines(self):
        return self.end - self.start + 1


class ScanError(Exception):
    pass


def _matching(tokens, i, open_text, close_text):
    """Index of the token that closes the group opened at tokens[i]."""
    depth = 0
    for j in range(i, len(tokens)):
        if tokens[j].text == open_text:
            depth += 1
        elif tokens[j].text == close_text:
            depth -= 1
            if depth == 0:
                return j
    raise ScanError(f"line {tokens[i].line}: '{open_text}' never closed")


def _top_level(header):
    """The header's tokens with each (...), [...] and {...} group folded into one item:
    ("group", open, close, first index, last index) or ("token", text, index)."""
    items, i = [], 0
    pairs = {"(": ")", "[": "]", "{": "}"}
    while i < len(header):
        t = header[i].text
        if t in pairs:
            j = _matching(header, i, t, pairs[t])
            items.append(("group", t, j, i))
            i = j + 1
        else:
            items.append(("token", t, i))
            i += 1
    return items


def classify(header):
    """What a { opens, from the declaration before it: 'namespace', 'class', 'function' (with
    its name) or 'other' (an enum's or an initialiser's braces, a requires clause...)."""
    texts = [t.text for t in header]
    if not texts:
        return "other", None
    if texts[0] == "namespace" or texts[:2] == ["inline", "namespace"]:
        return "namespace", None
    if texts == ["extern"]:  # extern "C" { (the literal is blanked)
        return "namespace", None
    items = _top_level(header)
    # An initialiser (= {...}, = [..](..) {...}: a lambda at namespace scope counts as a function);
    # template <typename T = int> is no initialiser.
    declaration = _without_template_parameters(items)
    for k, item in enumerate(declaration):
        if item[0] == "token" and item[1] == "=":
            after = declaration[k + 1:]
            if after and after[0][0] == "group" and after[0][1] == "[":
                return "function", _declarator_name(header, declaration[:k]) + " (lambda)"
            return "other", None
    params = _parameter_list(items)
    if params is not None:
        return "function", _function_name(header, items, params)
    keywords = [item[1] for item in declaration if item[0] == "token"]
    if "enum" in keywords:
        return "other", None
    if any(k in ("class", "struct", "union") for k in keywords):
        return "class", _class_name(header, items)
    if any(item[0] == "group" and item[1] == "(" for item in declaration):
        # Neither a function nor a variable's braces: rather than guess (and misread every
        # declaration up to the next ;), say so.
        raise ScanError(f"line {header[0].line}: cannot tell what the block after "
                        f"'{' '.join(t.text for t in header[:12])}' is")
    return "other", None


def _without_template_parameters(items):
    """Items with template<...> parameter lists removed (their `class T` declares no class)."""
    out, k = [], 0
    while k < len(items):
        if items[k][0] == "token" and items[k][1] == "template" and k + 1 < len(items) and \
                items[k + 1][0] == "token" and items[k + 1][1] == "<":
            depth, k = 0, k + 1
            while k < len(items):
                if items[k][0] == "token" and items[k][1] in ("<", ">", ">>"):
                    depth += {"<": 1, ">": -1, ">>": -2}[items[k][1]]
                k += 1
                if depth <= 0:
                    break
            continue
        out.append(items[k])
        k += 1
    return out


def _suffix_is_function(rest):
    """What may follow a function's parameter list before its body: qualifiers (const, noexcept,
    noexcept(...), override, &, __attribute__((...))...), a trailing return type, a member
    initialiser list, a requires clause or trailing [[attributes]]."""
    k = 0
    while k < len(rest) and rest[k][0] == "token" and rest[k][1] in _SUFFIX_WORDS:
        k += 1
        if k < len(rest) and rest[k - 1][1] in _SUFFIX_WITH_ARGUMENTS and rest[k][0] == "group" and \
                rest[k][1] == "(":
            k += 1
    if k == len(rest):
        return True
    first = rest[k]
    if first[0] == "token" and first[1] in ("->", ":", "requires"):
        return True  # a trailing return type, a constructor's member initialiser list, a constraint
    if first[0] == "group" and first[1] == "[":
        return all(x[0] == "group" and x[1] == "[" for x in rest[k:])
    return False


def _parameter_list(items):
    """Index (in items) of the declarator's parameter list, or None: the first (...) group after a
    name (not decltype, noexcept, an attribute...) or after a parenthesised declarator (a function
    returning a function pointer) that only qualifiers, a trailing return type or a member
    initialiser list follow. std::function<Status(int)> Make(int) { ... }: Make's, not Status's."""
    for k, item in enumerate(items):
        if item[0] != "group" or item[1] != "(" or k == 0:
            continue
        prev = items[k - 1]
        named = prev[0] == "token" and prev[1] not in _NOT_A_NAME and \
            (re.match(r"[A-Za-z_~]", prev[1]) is not None or prev[1] == ">")
        nested = prev[0] == "group" and prev[1] == "("
        if (named or nested) and _suffix_is_function(items[k + 1:]):
            return k
    return None


def _function_name(header, items, k):
    if items[k - 1][0] == "group":  # void (*Name(int x))(void): the name is inside
        inner = header[items[k - 1][3] + 1:items[k - 1][2]]
        names = [t.text for n, t in enumerate(inner[:-1]) if inner[n + 1].text == "(" and re.match(r"[A-Za-z_]", t.text)]
        return names[0] if names else "?"
    end = items[k - 1][2]
    if items[k - 1][0] == "token" and items[k - 1][1] == ">":  # a template's explicit arguments
        depth, j = 0, end
        while j >= 0:
            depth += {">": 1, "<": -1}.get(header[j].text, 0)
            if depth == 0:
                break
            j -= 1
        end = j - 1
    name = _qualified_name_ending_at(header, end)
    if re.fullmatch(r"[A-Z][A-Z0-9_]*", name):  # a macro such as TEST(Suite, Case)
        group = items[k]
        name += "(" + " ".join(t.text for t in header[group[3] + 1:group[2]]) + ")"
        name = name.replace(" , ", ", ")
    return name


def _qualified_name_ending_at(header, j):
    parts = [header[j].text]
    if j >= 1 and header[j - 1].text == "~":
        parts.insert(0, "~")
        j -= 1
    while j >= 2 and header[j - 1].text == "::":
        parts.insert(0, "::")
        j -= 2
        part = header[j].text
        if part == ">":  # Foo<T>::Bar
            depth = 0
            while j >= 0:
                depth += {">": 1, "<": -1}.get(header[j].text, 0)
                if depth == 0:
                    break
                j -= 1
            j -= 1
            part = header[j].text
        parts.insert(0, part)
    return "".join(parts)


def _declarator_name(header, items):
    names = [header[item[2]].text for item in items if item[0] == "token" and re.match(r"[A-Za-z_]", item[1])]
    return names[-1] if names else "?"


def _class_name(header, items):
    tokens = [item for item in _without_template_parameters(items) if item[0] == "token"]
    for k, item in enumerate(tokens):
        if item[1] in ("class", "struct", "union"):
            for later in tokens[k + 1:]:
                if re.match(r"[A-Za-z_]", later[1]) and later[1] not in ("final", "alignas"):
                    return later[1]
            break
    return "(anonymous)"


def find_functions(path, code):
    """Every function of one file, from its blanked code."""
    tokens = tokenize(code)
    functions = []
    end = _scan_scope(path, tokens, 0, [], functions)
    if end != len(tokens):
        raise ScanError(f"line {tokens[end].line}: '}}' closes nothing")
    return functions


def _scan_scope(path, tokens, i, names, functions):
    """Scans a namespace or class scope from tokens[i]; returns the index of its closing }
    (len(tokens) at the end of the file)."""
    start = i  # the first token of the declaration being read
    while i < len(tokens):
        t = tokens[i].text
        if t == ";":
            start = i + 1
        elif t == ":" and i > start and tokens[i - 1].text in ("public", "private", "protected") and i - 1 == start:
            start = i + 1
        elif t == "}":
            return i
        elif t in ("(", "["):
            close = _matching(tokens, i, t, ")" if t == "(" else "]")
            _find_lambdas(path, tokens, i, close, names, functions)  # a macro's or initialiser's
            i = close
        elif t == "{":
            header = tokens[start:i]
            if _in_member_initialiser(header):
                i = _matching(tokens, i, "{", "}")  # x_{value}: part of the header
            else:
                kind, name = classify(header)
                close = _scan_block(path, tokens, i, kind, name, header, names, functions)
                if kind in ("namespace", "function"):
                    start = close + 1
                i = close
        i += 1
    return i


def _scan_block(path, tokens, i, kind, name, header, names, functions):
    if kind == "namespace":
        close = _scan_scope(path, tokens, i + 1, names, functions)
    elif kind == "class":
        close = _scan_scope(path, tokens, i + 1, names + [name], functions)
    else:
        close = _matching(tokens, i, "{", "}")
        if kind == "other":
            _find_lambdas(path, tokens, i, close, names, functions)  # in a table's entries, say
    if close >= len(tokens) or tokens[close].text != "}":
        raise ScanError(f"line {tokens[i].line}: '{{' never closed")
    if kind == "function":
        qualified = "::".join(names + [name])
        functions.append(Function(path, qualified, header[0].line, tokens[close].line))
    return close


_LAMBDA_SPECIFIERS = {"mutable", "constexpr", "consteval", "static", "noexcept"}


def _find_lambdas(path, tokens, lo, hi, names, functions):
    """Lambdas between tokens lo and hi outside any function (in a namespace-scope table or a
    macro's arguments such as a test's name generator), each measured as a function of its own:
    [captures] (parameters) specifiers -> type { body }."""
    j = lo + 1
    while j < hi:
        if tokens[j].text != "[" or re.match(r"[A-Za-z_0-9)\]>]", tokens[j - 1].text):
            j += 1  # a subscript or an attribute's inner bracket, not a lambda's captures
            continue
        k = _matching(tokens, j, "[", "]") + 1
        if k < hi and tokens[k].text == "(":
            k = _matching(tokens, k, "(", ")") + 1
        while k < hi and tokens[k].text in _LAMBDA_SPECIFIERS:
            k += 1
            if tokens[k - 1].text == "noexcept" and k < hi and tokens[k].text == "(":
                k = _matching(tokens, k, "(", ")") + 1
        if k < hi and tokens[k].text == "->":
            while k < hi and tokens[k].text not in ("{", ";", ","):
                k += 1
        if k < hi and tokens[k].text == "{":
            close = _matching(tokens, k, "{", "}")
            functions.append(Function(path, "::".join(names + ["(lambda)"]), tokens[j].line, tokens[close].line))
            j = close + 1
        else:
            j += 1


def _in_member_initialiser(header):
    """Inside a constructor's member initialiser list: `) : a_(x), b_` or `) noexcept : b_`."""
    if not header or not re.match(r"[A-Za-z_>]", header[-1].text):
        return False
    items = _top_level(header)
    params = _parameter_list(items)
    if params is None:
        return False
    rest = items[params + 1:]
    k = 0
    while k < len(rest) and rest[k][0] == "token" and rest[k][1] in _SUFFIX_WORDS:
        k += 1
        if k < len(rest) and rest[k - 1][1] in _SUFFIX_WITH_ARGUMENTS and rest[k][0] == "group":
            k += 1
    return k < len(rest) and rest[k][0] == "token" and rest[k][1] == ":"


# ---- The tree.

class SourceFile:
    def __init__(self, root, path):
        self.path = path  # relative to root, with /
        with open(os.path.join(root, path), encoding="utf-8", errors="replace") as f:
            self.text = f.read()
        self.lines = len(self.text.splitlines())
        self.without_comments, self.code = strip_source(self.text)
        self.node = os.path.splitext(path)[0]
        self.folder = os.path.dirname(path)
        self.module = path.split("/")[0]
        self.strict = self.module in STRICT_DIRS


_INCLUDE = re.compile(r'^[ \t]*#[ \t]*include[ \t]*"([^"]+)"', re.M)


def load_tree(root):
    files = []
    for top in STRICT_DIRS + REPORTED_DIRS:
        for folder, dirs, names in os.walk(os.path.join(root, top)):
            dirs[:] = sorted(d for d in dirs if not d.startswith("."))
            for name in sorted(names):
                if name.endswith(SOURCE_EXTENSIONS):
                    rel = os.path.relpath(os.path.join(folder, name), root).replace(os.sep, "/")
                    files.append(SourceFile(root, rel))
    return files


def resolve_includes(root, files):
    """(file, included path, line) for every quoted include that names a file of the tree: looked
    up beside the including file first, then from the repository root (the include path every
    target has: ${CMAKE_SOURCE_DIR}). Also the includes that name no file here (system headers)."""
    known = {f.path: f for f in files}
    edges, unresolved = [], []
    for f in files:
        for m in _INCLUDE.finditer(f.without_comments):
            name = m.group(1)
            line = f.without_comments.count("\n", 0, m.start()) + 1
            beside = os.path.normpath(os.path.join(f.folder, name)).replace(os.sep, "/")
            target = beside if beside in known else os.path.normpath(name).replace(os.sep, "/")
            if target in known:
                edges.append((f, known[target], line))
            elif not os.path.exists(os.path.join(root, target)):
                unresolved.append((f, name, line))
    return edges, unresolved


def strongly_connected(graph):
    """Tarjan's components (iterative) of {node: set(successors)}; those with a loop, sorted."""
    index, low, on_stack, stack, components, counter = {}, {}, set(), [], [], [0]
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph.get(root, ()))))]
        index[root] = low[root] = counter[0]
        counter[0] += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, successors = work[-1]
            advanced = False
            for nxt in successors:
                if nxt not in index:
                    index[nxt] = low[nxt] = counter[0]
                    counter[0] += 1
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(graph.get(nxt, ())))))
                    advanced = True
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    components.append(sorted(component))
    return sorted(components)


def a_cycle(graph, members):
    """One loop through the component's first member (breadth-first: a shortest one)."""
    inside, first = set(members), members[0]
    previous, frontier = {first: None}, [first]
    while frontier:
        following = []
        for node in frontier:
            for nxt in sorted(graph.get(node, ())):
                if nxt == first:
                    path = [node]
                    while previous[path[-1]] is not None:
                        path.append(previous[path[-1]])
                    return list(reversed(path)) + [first]
                if nxt in inside and nxt not in previous:
                    previous[nxt] = node
                    following.append(nxt)
        frontier = following
    return members


class Findings:
    """What the rules found: violations fail the check, warnings are only printed."""

    def __init__(self):
        self.violations, self.warnings, self.used_allowances = [], [], set()

    def report(self, strict, key, message):
        """A size rule broken: a violation in the module folders, else a warning; either way an
        allowance for `key` makes it a warning that says why."""
        if key in ALLOWANCES:
            self.used_allowances.add(key)
            self.warnings.append(f"{message} (allowed: {ALLOWANCES[key]})")
        elif strict:
            self.violations.append(message)
        else:
            self.warnings.append(message + " (reported, not failed: outside the module folders)")

    def report_unused_allowances(self):
        for key in sorted(set(ALLOWANCES) - self.used_allowances, key=str):
            self.violations.append(f"allowance that matches nothing (remove it from ALLOWANCES): {key}")


def check_sizes(files, findings):
    """Rule 1; returns every function found."""
    functions = []
    for f in files:
        if f.lines > MAX_FILE_LINES:
            findings.report(f.strict, ("file", f.path), f"file over {MAX_FILE_LINES} lines: {f.path} ({f.lines} lines)")
        try:
            found = find_functions(f.path, f.code)
        except ScanError as e:
            findings.violations.append(f"cannot scan {f.path}: {e}")
            continue
        for fn in found:
            fn.strict = f.strict
            functions.append(fn)
            if fn.lines > MAX_FUNCTION_LINES:
                findings.report(f.strict, ("function", f.path, fn.name),
                                f"function over {MAX_FUNCTION_LINES} lines: {f.path}:{fn.start} {fn.name} "
                                f"({fn.lines} lines)")
    return functions


class IncludeGraphs:
    """The file-pair and folder graphs of the tree's quoted includes, with, for each edge, the
    first include line that makes it."""

    def __init__(self, root, files):
        edges, self.unresolved = resolve_includes(root, files)
        self.edges = edges
        self.files = {f.node: set() for f in files}
        self.folders = {f.folder: set() for f in files}
        self.why = {}
        for source, target, line in edges:
            because = f"{source.path}:{line} includes {target.path}"
            if source.node != target.node:
                self.files[source.node].add(target.node)
                self.why.setdefault(("file", source.node, target.node), because)
            if source.folder != target.folder:
                self.folders[source.folder].add(target.folder)
                self.why.setdefault(("folder", source.folder, target.folder), because)


def check_module_rules(graphs, findings):
    """Rule 4."""
    for source, target, line in graphs.edges:
        for module, forbidden, reason in MODULE_RULES:
            if source.path.startswith(module + "/") and target.path.startswith(forbidden + "/"):
                findings.violations.append(f"forbidden include: {source.path}:{line} includes {target.path} "
                                           f"({module}/ must not include {forbidden}/; {reason})")


def check_loops(graphs, findings):
    """Rules 2 and 3: each strongly connected group of nodes, with one loop through it and the
    include lines that make that loop."""
    for kind, graph, lead in (("file", graphs.files, ""), ("folder", graphs.folders, "e.g. ")):
        for members in strongly_connected(graph):
            loop = a_cycle(graph, members)
            steps = "; ".join(graphs.why[(kind, a, b)] for a, b in zip(loop, loop[1:]))
            findings.violations.append(f"include loop between {kind}s: {' -> '.join(loop)} "
                                       f"(members: {', '.join(members)}; {lead}{steps})")


def check(root, verbose=False, out=sys.stdout):
    """Runs every rule over the tree at root; prints violations (and warnings) and returns their
    number."""
    files = load_tree(root)
    findings = Findings()
    functions = check_sizes(files, findings)
    graphs = IncludeGraphs(root, files)
    check_module_rules(graphs, findings)
    check_loops(graphs, findings)
    findings.report_unused_allowances()
    for message in findings.warnings:
        print(f"structure-check: warning: {message}", file=out)
    for message in findings.violations:
        print(f"structure-check: {message}", file=out)
    strict_functions = sorted((fn for fn in functions if fn.strict), key=lambda fn: (-fn.lines, fn.path, fn.start))
    strict_files = sorted((f for f in files if f.strict), key=lambda f: (-f.lines, f.path))
    if verbose:
        _print_details(strict_functions, strict_files, graphs, out)
    if not findings.violations:
        _print_summary(strict_functions, strict_files, graphs, len(findings.warnings), out)
    return len(findings.violations)


def _print_summary(functions, files, graphs, warnings, out):
    longest = f"{functions[0].lines} lines: {functions[0].path}:{functions[0].start} {functions[0].name}" \
        if functions else "none"
    print(f"structure-check: ok: {len(files)} files in {'/, '.join(STRICT_DIRS)}/ (longest function "
          f"{longest}; longest file {files[0].lines if files else 0} lines); no include loop among "
          f"{len(graphs.files)} file pairs or {len(graphs.folders)} folders; module rules hold; "
          f"{warnings} warning(s) in {'/, '.join(REPORTED_DIRS)}/", file=out)


def _print_details(functions, files, graphs, out):
    print(f"structure-check: the 5 longest functions of {'/, '.join(STRICT_DIRS)}/ (of {len(functions)}):", file=out)
    for fn in functions[:5]:
        print(f"  {fn.lines:4d} lines  {fn.path}:{fn.start}-{fn.end}  {fn.name}", file=out)
    print("structure-check: the 5 longest files:", file=out)
    for f in files[:5]:
        print(f"  {f.lines:4d} lines  {f.path}", file=out)
    print("structure-check: folder graph (folder -> the folders it includes):", file=out)
    for folder in sorted(graphs.folders):
        print(f"  {folder} -> {', '.join(sorted(graphs.folders[folder])) or '(none)'}", file=out)
    names = sorted({name for _, name, _ in graphs.unresolved})
    print(f"structure-check: {len(names)} quoted include(s) name no file of the tree (system or "
          f"generated headers): {', '.join(names) or '(none)'}", file=out)


# ---- The self-test: fixtures that break each rule once, and C++ that trips naive scanners.

def _body(lines):
    """A function body of `lines` lines in all (signature and closing brace included)."""
    return "\n".join(["  x += 1;"] * (lines - 2))


SELF_TEST_TREE = {
    # 80 lines: allowed; 81: one over. Braces in literals and comments must not count.
    "search/ok.h": "#pragma once\nint Eighty(int x);\n",
    "search/ok.cc": ('#include "search/ok.h"\n\nnamespace tunepar::search {\n\nint Eighty(int x) {\n'
                     + _body(80) + "\n}\n\n"
                     "int EightyOne(int x) {\n" + _body(81) + "\n}\n\n"
                     "// a comment with a brace { that is not code\n"
                     "const char* Text() {\n  return \"}}}\";  /* } */\n}\n"
                     "char Brace() {\n  return '{';\n}\n"
                     'const char* Raw() {\n  return R"x(\n}}} )" {\n)x";\n}\n'
                     "int Digits() {\n  return 1'000'000;\n}\n"
                     # Parentheses before the name, after the parameters, or around the name.
                     "std::function<int(int)> MakeAdder(int n) {\n  return [n](int v) { return v + n; };\n}\n"
                     "void (*Lookup(const char* name))(void) {\n  return nullptr;\n}\n"
                     "void Traced() __attribute__((noinline)) {\n}\n"
                     "template <typename T = int>\nT Zero() {\n  return T{};\n}\n"
                     "int After() {\n  return 0;\n}\n\n}  // namespace tunepar::search\n"),
    # Lambdas count in their function; member initialisers with braces; class members; operators;
    # macros with braces; an enum class; a namespace-scope initialiser; a TEST-style macro.
    "runner/shapes.h": ("#pragma once\n#define TP_LOOP(n) do { for (int i = 0; i < (n); ++i) { } } while (0)\n"
                        "namespace tunepar::runner {\nenum class Color : int { kRed, kBlue };\n"
                        "inline constexpr int kTable[] = {1, 2, 3};\n"
                        "class Shape {\n public:\n  Shape(int a, int b) : a_{a}, b_(b) {\n    a_ += 1;\n  }\n"
                        "  int Area() const noexcept {\n    return a_ * b_;\n  }\n"
                        "  bool operator==(const Shape& o) const {\n    return a_ == o.a_;\n  }\n"
                        "  auto Sum() const -> int {\n    return a_ + b_;\n  }\n\n private:\n  int a_, b_;\n};\n"
                        "template <class T>\nstruct Box {\n  T Get() const { return value; }\n  T value{};\n};\n"
                        "}  // namespace tunepar::runner\n"),
    "runner/shapes.cc": ('#include "runner/shapes.h"\n#include "base/words.h"\n#include <vector>\n\n'
                         "namespace tunepar::runner {\n\nint Long() {\n  auto f = [](int v) {\n"
                         + _body(79) + "\n    return v;\n  };\n  return f(1);\n}\n\n"
                         "TEST(ShapeTest, Area) {\n  TP_LOOP(3);\n}\n\n"
                         # Lambdas outside functions: in a table's entries and in a macro's arguments.
                         "const Row kRows[] = {\n    {1, [](int a) {\n       return a;\n     }},\n"
                         "    {kTable[0], [&](int) mutable -> int { return 0; }},\n};\n"
                         "INSTANTIATE(Shapes, [](const Info& info) {\n  return info.name;\n});\n\n"
                         "}  // namespace tunepar::runner\n"),
    # An include loop between two file pairs, .cc files included.
    "store/a.h": '#pragma once\n#include "store/b.h"\n',
    "store/b.h": "#pragma once\n",
    "store/b.cc": '#include "store/b.h"\n#include "store/a.h"\n',
    # A folder loop (tuner/x -> tuner/y -> tuner/x) and a forbidden include (search -> runner).
    "tuner/x/one.h": '#pragma once\n#include "tuner/y/three.h"\n',
    "tuner/y/two.cc": '#include "tuner/x/one.h"\n#include "tuner/y/three.h"\n',
    "tuner/y/three.h": "#pragma once\n",
    "search/bad.cc": '#include "runner/shapes.h"\n',
    "base/words.h": "#pragma once\n",
    # A long function in tests/ is a warning, not a violation.
    "tests/long_test.cc": "void LongTest() {\n" + _body(90) + "\n}\n",
    # 801 lines: one over.
    "store/big.cc": "\n" * 801,
}

SELF_TEST_EXPECTED_FUNCTIONS = {
    "search/ok.cc": [("Eighty", 80), ("EightyOne", 81),
                     ("Text", 3), ("Brace", 3),
                     ("Raw", 5), ("Digits", 3),
                     ("MakeAdder", 3), ("Lookup", 3), ("Traced", 2), ("Zero", 4), ("After", 3)],
    "runner/shapes.h": [("Shape::Shape", 3), ("Shape::Area", 3),
                        ("Shape::operator==", 3), ("Shape::Sum", 3),
                        ("Box::Get", 1)],
    "runner/shapes.cc": [("Long", 83), ("TEST(ShapeTest, Area)", 3), ("(lambda)", 3), ("(lambda)", 1),
                         ("(lambda)", 3)],
    "tests/long_test.cc": [("LongTest", 90)],
}

SELF_TEST_EXPECTED_VIOLATIONS = [
    "structure-check: file over 800 lines: store/big.cc (801 lines)",
    "structure-check: function over 80 lines: runner/shapes.cc:7 Long (83 lines)",
    "structure-check: function over 80 lines: search/ok.cc:86 EightyOne (81 lines)",
    "structure-check: forbidden include: search/bad.cc:1 includes runner/shapes.h (search/ must not include "
    "runner/; design.md: search includes nothing of the others)",
    "structure-check: include loop between files: store/a -> store/b -> store/a (members: store/a, store/b; "
    "store/a.h:2 includes store/b.h; store/b.cc:2 includes store/a.h)",
    "structure-check: include loop between folders: tuner/x -> tuner/y -> tuner/x (members: tuner/x, tuner/y; "
    "e.g. tuner/x/one.h:2 includes tuner/y/three.h; tuner/y/two.cc:1 includes tuner/x/one.h)",
]


def self_test():
    failures = []
    with tempfile.TemporaryDirectory(prefix="structure-check-") as root:
        for path, text in SELF_TEST_TREE.items():
            os.makedirs(os.path.join(root, os.path.dirname(path)), exist_ok=True)
            with open(os.path.join(root, path), "w") as f:
                f.write(text)
        for path, expected in SELF_TEST_EXPECTED_FUNCTIONS.items():
            found = [(fn.name, fn.lines) for fn in find_functions(path, strip_source(SELF_TEST_TREE[path])[1])]
            if found != expected:
                failures.append(f"{path}: functions {found}, expected {expected}")

        class Capture:
            def __init__(self):
                self.lines = []

            def write(self, text):
                self.lines.extend(x for x in text.split("\n") if x)

        captured = Capture()
        count = check(root, out=captured)
        got = sorted(x for x in captured.lines if not x.startswith("structure-check: warning"))
        if got != sorted(SELF_TEST_EXPECTED_VIOLATIONS) or count != len(SELF_TEST_EXPECTED_VIOLATIONS):
            failures.append("violations:\n    " + "\n    ".join(got) + "\n  expected:\n    "
                            + "\n    ".join(sorted(SELF_TEST_EXPECTED_VIOLATIONS)))
        warned = [x for x in captured.lines if x.startswith("structure-check: warning")]
        if not any("tests/long_test.cc:1 LongTest (90 lines)" in x for x in warned):
            failures.append(f"no warning for tests/long_test.cc's 90-line function: {warned}")
        unclear = os.path.join(root, "base", "unclear.cc")
        with open(unclear, "w") as f:
            f.write("Make(1) kValue {\n}\n")
        captured = Capture()
        check(root, out=captured)
        os.remove(unclear)
        if not any(x.startswith("structure-check: cannot scan base/unclear.cc: line 1: cannot tell") for x in captured.lines):
            failures.append(f"a block that is neither a function nor a variable's was not reported: {captured.lines}")
        unbalanced = os.path.join(root, "base", "broken.cc")
        with open(unbalanced, "w") as f:
            f.write("#if A\nvoid F() {\n#else\nvoid G() {\n#endif\n}\n")
        captured = Capture()
        check(root, out=captured)
        if not any(x.startswith("structure-check: cannot scan base/broken.cc") for x in captured.lines):
            failures.append("an unbalanced file was not reported")
    for failure in failures:
        print(f"structure-check --self-test: FAILED: {failure}")
    if not failures:
        print(f"structure-check --self-test: ok ({len(SELF_TEST_TREE)} fixture files, "
              f"{sum(map(len, SELF_TEST_EXPECTED_FUNCTIONS.values()))} functions measured, "
              f"{len(SELF_TEST_EXPECTED_VIOLATIONS)} violations caught, an unclear block and an unbalanced file "
              "reported)")
    return 2 if failures else 0


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--root", default=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    parser.add_argument("--verbose", action="store_true")
    parser.add_argument("--self-test", action="store_true")
    args = parser.parse_args()
    if args.self_test:
        return self_test()
    if not os.path.isdir(args.root):
        print(f"structure-check: no such folder: {args.root}", file=sys.stderr)
        return 2
    return 1 if check(args.root, verbose=args.verbose) else 0


if __name__ == "__main__":
    sys.exit(main())
