"""Tools on the viewing side, never imported by the app's pages: the app benchmark (`bench_app`),
the efficiency study's report (`efficiency_report`) and synthetic run stores for tests and
benchmarks (`synthetic`).
"""
