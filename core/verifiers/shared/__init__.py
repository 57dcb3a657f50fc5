"""What every verifier family builds on, apart from the families themselves (so that `ifeval/`, `ifbench/` and the
workbench's `task:` families import downwards only): `base` (Verifier, VerifyResult, argument specs, a custom
check's time limit), `registry` (register, build, load_custom), `kinds` (REWARD_KIND), and the text helpers `text`
(words, sentences), `punkt` (NLTK's Punkt sentence splitter with the English parameters, nothing downloaded) and
`language` (language identification). The public entry points stay in `core.verifiers`. Never imports torch."""
