"""`wgnn conform`: conformance of the numpy backend and every GPU adapter against expected outputs.

    sources.collect(["own", "node"], ops="^Conv$")  -> cases (own op library, ONNX node tests, zoo, paths)
    runner.run_cases(cases, targets)               -> per case and target: pass / fallback / fail / error / unsupported
    report.build_report(...), report.write_report(report, "out/")  -> conform.json + conform.html

See docs/conformance.md.
"""
