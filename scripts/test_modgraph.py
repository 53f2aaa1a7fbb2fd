#!/usr/bin/env python3
"""scripts/modgraph.py: the crates' module graphs are acyclic, and the checker does find a
cycle where there is one (run by scripts/test.sh: python3 scripts/test_modgraph.py)."""
import os
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
MODGRAPH = os.path.join(HERE, "modgraph.py")


def run(*args):
    return subprocess.run([sys.executable, MODGRAPH] + list(args), capture_output=True, text=True)


def tree(files):
    """A temporary workspace holding `files` ({relative path: text})."""
    d = tempfile.TemporaryDirectory()
    for rel, text in files.items():
        path = os.path.join(d.name, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
    return d


class ModGraph(unittest.TestCase):
    def test_the_crates_have_no_cycles(self):
        p = run()
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        for crate in ("telemetry", "engine", "ui", "app"):
            self.assertIn(f"{crate}: no cycles", p.stdout)

    def test_a_two_cycle_is_reported_with_an_edge_per_arrow(self):
        with tree({
            "demo/src/lib.rs": "pub mod a;\npub mod b;\n",
            "demo/src/a.rs": "//! A.\n\nuse crate::b::B;\n\npub struct A(pub B);\n",
            "demo/src/b.rs": "pub struct B;\n\npub fn f(a: &crate::a::A) -> usize {\n    a.0.0\n}\n",
        }) as d:
            p = run("--root", d, "--crates", "demo")
        self.assertEqual(p.returncode, 1, p.stdout + p.stderr)
        self.assertIn("demo: 1 cycle", p.stdout)
        self.assertIn("  cycle: a, b\n", p.stdout)
        self.assertIn(f"    a -> b  {os.path.join('demo', 'src', 'a.rs')}:3\n", p.stdout)
        self.assertIn(f"    b -> a  {os.path.join('demo', 'src', 'b.rs')}:3\n", p.stdout)

    def test_groups_super_and_re_exports_are_followed_to_the_defining_module(self):
        # x re-exports x::deep's g; x::deep names Zed in a group (re-exported at the root from
        # y::inner, where it is defined); y::inner reaches back to x through super::super.
        with tree({
            "demo/src/lib.rs": "pub mod x;\npub mod y;\npub use y::inner::Zed;\n",
            "demo/src/x/mod.rs": "pub mod deep;\npub use self::deep::g;\npub struct X;\n",
            "demo/src/x/deep.rs": "use crate::{x, Zed};\npub fn g(_: Zed) {}\n",
            "demo/src/y/mod.rs": "pub mod inner;\n",
            "demo/src/y/inner.rs": "pub struct Zed;\nfn h(_: super::super::x::X) {}\n",
        }) as d:
            p = run("--root", d, "--crates", "demo", "--edges")
        self.assertEqual(p.returncode, 1, p.stdout + p.stderr)
        self.assertIn("  cycle: x, x::deep, y::inner\n", p.stdout)
        self.assertIn("    x::deep -> y::inner  ", p.stdout)
        self.assertIn("    y::inner -> x  ", p.stdout)
        self.assertNotIn("-> crate", p.stdout)

    def test_comments_strings_and_test_modules_are_not_edges(self):
        with tree({
            "demo/src/lib.rs": "pub mod a;\npub mod b;\n",
            "demo/src/a.rs": "use crate::b::B;\npub struct A(pub B);\n",
            "demo/src/b.rs": (
                "//! See [`crate::a::A`].\n"
                "pub struct B;\n"
                "/* crate::a::A */\n"
                "pub const S: &str = \"crate::a::A\";\n"
                "#[cfg(test)]\n"
                "mod tests {\n"
                "    use crate::a::A;\n"
                "}\n"
                "#[cfg(test)]\n"
                "#[path = \"b_tests.rs\"]\n"
                "mod more;\n"
            ),
            "demo/src/b_tests.rs": "use crate::a::A;\n",
        }) as d:
            p = run("--root", d, "--crates", "demo")
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        self.assertIn("demo: no cycles", p.stdout)


if __name__ == "__main__":
    unittest.main()
