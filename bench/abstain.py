#!/usr/bin/env python3
"""Relevance an agent can act on: is `relevance` calibrated, and does a floor on it keep
off-topic prompts from bringing notes while on-topic questions keep theirs?

For each judged dev set under ../shared/eval (read in place), in the mode asked (hybrid by
default): every judged question is asked (k=10), and each hit's relevance features are kept
with whether it is a relevant note. Then 200+ off-topic prompts are asked of the same vault:
the questions of the other sets (another language, or another kind of text), chit-chat and
code requests, written here. It prints

- the logistic model fitted on the judged hits (`--fit`: the coefficients to put in
  [search] relevance / relevance_text), and for the model in use a reliability table: hits
  binned by relevance, with the share that were relevant (calibrated: the two agree);
- for the floor (`--floor`, default [agent] min_relevance, and a sweep around it): the share
  of off-topic prompts that bring no hit at or over it (goal >= 95 %), and recall@5 of the
  judged questions as MCP recall gives them (nothing when no hit of the k reaches the floor)
  against without a floor (goal: under one point lost), each set and each half (split by
  conversation or article, as bench/eval.py).

    python bench/abstain.py --fit                 # fit, then report with the fitted model
    python bench/abstain.py --floor 0.3 --mode text
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import numpy as np  # noqa: E402

import eval as ev  # noqa: E402
from vaultmem.config import DEFAULTS  # noqa: E402
from vaultmem.search import Query, Searcher, relevance, relevance_inputs  # noqa: E402

SETS = ["korquad-dev", "jsquad", "locomo-turns", "locomo-session"]
CHITCHAT = """Write a haiku about autumn leaves
how are you doing today?
Tell me a joke about cats
What's a good name for a golden retriever puppy?
Can you recommend a sci-fi novel for the weekend?
thanks, that was really helpful!
What should I cook for dinner tonight with chicken and rice?
Summarize the plot of Hamlet in two sentences
good morning! ready to start?
What is the capital of Australia?
Translate 'good luck' into French
How many ounces are in a pound?
Give me three tips for better sleep
What's the weather usually like in Lisbon in April?
Who painted the Mona Lisa?
Explain the offside rule in football
I'm bored, suggest something fun to do
What rhymes with orange?
Describe a sunset over the ocean in one paragraph
How do I get a red wine stain out of a carpet?
What's the difference between a latte and a cappuccino?
Recommend a podcast about history
Can you help me plan a birthday party for a 7 year old?
What is the tallest mountain in Africa?
Write a limerick about a programmer
ok cool, let's continue
Tell me something interesting about octopuses
What year did the Berlin Wall fall?
How long should I boil an egg for a soft yolk?
What are some good stretches after running?
Which planet has the most moons?
Compose a short poem about coffee
What's a polite way to decline a meeting invitation?
Explain photosynthesis to a ten year old
Suggest a name for a fantasy kingdom
How do I say thank you in Japanese?
What's the best way to learn to juggle?
Name five famous jazz musicians
lol that's funny
What does a panda eat?
Write a two line motivational quote
How many players are on a basketball team?
What is the boiling point of water on Mount Everest?
Give me a riddle and its answer
Describe the smell of rain
What are the rules of chess castling?
Which is bigger, a blue whale or a dinosaur?
Plan a three day trip to Rome
What is origami?
Suggest a houseplant that survives low light""".splitlines()
CODE = """Write a Python function that reverses a linked list
How do I center a div with CSS flexbox?
Implement binary search in Rust
Write a SQL query that finds duplicate emails in a users table
Explain the difference between let and const in JavaScript
Write a bash one-liner to count lines in all .py files
How do I read a CSV file with pandas?
Write a regex that matches an IPv4 address
Implement quicksort in Go
What does the Python GIL do?
Write a React component for a counter button
How do I make an HTTP GET request in Java?
Write a function to check if a string is a palindrome
Convert this list comprehension to a map call: [x*2 for x in xs]
How do I create a virtual environment with venv?
Write a Dockerfile for a Flask app
Explain big-O notation for nested loops
Write a C program that prints the Fibonacci sequence
How do I squash the last three git commits?
Implement an LRU cache in Python
Write a Kotlin data class for a User with name and age
How do I handle promises with async/await?
Write a unit test with pytest for an add function
What is a closure in programming?
Parse JSON in Swift
Write a Makefile that builds a C project
How do I sort a dictionary by value in Python?
Write a TypeScript interface for an API response with pagination
Implement a stack using two queues
How do I debounce a function in JavaScript?
Write a Haskell function that sums a list
How do I use grep to search recursively for a word?
Write an HTML form with email and password fields
Implement Dijkstra's algorithm
How do I merge two sorted arrays?
Write a Python script to rename files in a folder
What is the difference between a process and a thread?
How do I configure ESLint for a new project?
Write a GraphQL schema for blog posts and comments
Generate a random password in Python
Explain how a hash map handles collisions
Write a Go HTTP server that returns hello world
How do I profile a slow Python function?
Write a Ruby method that capitalizes each word
How do I deep copy an object in JavaScript?
Implement FizzBuzz in Elixir
Write a CSS animation that fades in an element
How do I connect to PostgreSQL from Node.js?
Explain tail recursion
Write a Lua function to split a string by commas""".splitlines()


def off_topic(name: str, rng: random.Random) -> list[str]:
    """Prompts no note of set `name` answers: 50 questions of each other set that is not the
    same conversations (LoCoMo turns and session share them), chit-chat and code requests."""
    same = {"locomo-turns": "locomo", "locomo-session": "locomo"}
    others = [s for s in SETS if s != name and same.get(s, s) != same.get(name, name)]
    out = []
    for other in others:
        qs = [q["query"] for q in ev.load_queries(other)]
        out += rng.sample(qs, min(50, len(qs)))
    return out + CHITCHAT + CODE


def features(searcher: Searcher, text: str, mode: str) -> list[tuple[dict, str]]:
    hits, _ = searcher.search(Query(text, k=10, mode=mode, explain=True, record=False))
    return [({k: h.explain[k] for k in ("coverage", "evidence", "cosine") if k in h.explain}, ev.note_id(h)) for h in hits]


def fit(rows: list[tuple[dict, bool]]) -> list[float]:
    """Logistic regression (Newton's method, a little L2) of relevant on relevance_inputs."""
    x = np.array([[1.0] + relevance_inputs(f) for f, _ in rows])
    y = np.array([1.0 if r else 0.0 for _, r in rows])
    w = np.zeros(x.shape[1])
    for _ in range(50):
        p = 1 / (1 + np.exp(-x @ w))
        grad = x.T @ (p - y) + 1e-3 * w
        hess = (x * (p * (1 - p))[:, None]).T @ x + 1e-3 * np.eye(len(w))
        w -= np.linalg.solve(hess, grad)
    return [round(float(v), 3) for v in w]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sets", nargs="*", default=SETS)
    ap.add_argument("--mode", default="hybrid", choices=["hybrid", "text", "vector"])
    ap.add_argument("--fit", action="store_true", help="fit the model on the judged hits and report with it")
    ap.add_argument("--floor", type=float, default=DEFAULTS["agent"]["min_relevance"])
    ap.add_argument("--floor-only", action="store_true", help="report the floor given, not a sweep")
    ap.add_argument("--k", type=int, default=5, help="hits recall returns")
    ap.add_argument("--state-root", default=str(ROOT / "bench" / "out"))
    ap.add_argument("--cache", help="keep the hits' features in this JSON file, and read them from it when it is "
                                    "there (to try floors and models without asking again)")
    args = ap.parse_args()
    eargs = argparse.Namespace(**{k: None for k in (
        "fusion", "rrf_k", "text_weight", "vector_weight", "min_cosine", "entity_weight", "importance_weight",
        "candidates", "half_life", "date_weight", "expand_notes", "expand_terms", "expand_weight", "chunk_chars")},
        dtype="float16", embedder="use", state_root=args.state_root)
    judged: dict[str, list] = {}
    stray: dict[str, list] = {}
    rng = random.Random(2026)
    cache = Path(args.cache) if args.cache else None
    if cache is not None and cache.is_file():
        saved = json.loads(cache.read_text())
        judged = {k: [(h, set(r), [tuple(x) for x in hits]) for h, r, hits in v] for k, v in saved["judged"].items()}
        stray = {k: [[tuple(x) for x in hits] for hits in v] for k, v in saved["stray"].items()}
    for name in [] if judged else args.sets:
        idx = ev.open_index(name, eargs)
        searcher = Searcher(idx)
        qs = ev.load_queries(name)
        groups = sorted({ev.group_of(q) for q in qs})
        half = {g: "AB"[i % 2] for i, g in enumerate(groups)}
        judged[name] = [(half[ev.group_of(q)], set(q["relevant_note_ids"]), features(searcher, q["query"], args.mode))
                        for q in qs]
        stray[name] = [features(searcher, p, args.mode) for p in off_topic(name, rng)]
        idx.close()
        print(f"# {name}: {len(qs)} judged questions, {len(stray[name])} off-topic prompts", file=sys.stderr)
    if cache is not None and not cache.is_file():
        cache.write_text(json.dumps({"judged": {k: [(h, sorted(r), hits) for h, r, hits in v] for k, v in judged.items()},
                                     "stray": stray}))
    cfg = argparse.Namespace(**{k: tuple(v) for k, v in DEFAULTS["search"].items() if k.startswith("relevance")})
    if args.fit:  # the judged hits, and every hit of an off-topic prompt, which answers nothing
        rows = [(f, nid in rel) for name in judged for _, rel, hits in judged[name] for f, nid in hits]
        rows += [(f, False) for name in stray for hits in stray[name] for f, _ in hits]
        w = fit(rows)
        print(f"fitted on {len(rows)} judged hits ({sum(r for _, r in rows)} relevant): "
              f"{'relevance' if args.mode != 'text' else 'relevance_text'} = {w}")
        if args.mode != "text":
            cfg.relevance = tuple(w)
        else:
            cfg.relevance_text = tuple(w)

    def rel(f: dict) -> float:
        return relevance(f, cfg)

    print("\nreliability (judged hits, all sets): relevance bin -> hits, share relevant")
    bins = [[0, 0] for _ in range(10)]
    for name in judged:
        for _, r, hits in judged[name]:
            for f, nid in hits:
                b = min(9, int(rel(f) * 10))
                bins[b][0] += 1
                bins[b][1] += nid in r
    for i, (n, good) in enumerate(bins):
        if n:
            print(f"  {i / 10:.1f}-{(i + 1) / 10:.1f}  {n:6d}  {good / n:.3f}")
    floors = [args.floor] if args.floor_only else sorted({args.floor, 0.005, 0.01, 0.015, 0.02, 0.03, 0.05})
    for floor in floors:
        print(f"\nfloor {floor} (recall answers nothing when no hit of its {args.k} reaches it), mode {args.mode}")
        for name in judged:
            quiet = sum(1 for hits in stray[name] if not any(rel(f) >= floor for f, _ in hits[: args.k]))
            line = f"  {name:15s} off-topic with nothing: {quiet / len(stray[name]):.3f} ({quiet}/{len(stray[name])})"
            for h in ("A", "B", None):
                qs = [(r, hits) for hh, r, hits in judged[name] if h is None or hh == h]
                base = sum(1 for r, hits in qs if any(nid in r for _, nid in hits[: args.k])) / len(qs)
                kept = sum(1 for r, hits in qs if any(nid in r for _, nid in hits[: args.k])
                           and max(rel(f) for f, _ in hits[: args.k]) >= floor) / len(qs)
                line += f"  {'all' if h is None else 'half ' + h}: R@{args.k} {base:.3f} -> {kept:.3f}"
            print(line)

if __name__ == "__main__":
    main()
