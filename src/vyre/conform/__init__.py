"""vyre.conform — the conformance corpus, witness inputs, the random program generator, the
parity matrix runner, divergence minimisation and certificates (`vyre conform`)."""

from .corpus import CorpusEntry, corpus, corpus_by_name
from .generator import GenOptions, programs, random_program
from .runner import (
    BackendReport,
    CaseResult,
    ConformInterrupted,
    certificate,
    diverges,
    load_repro,
    minimise,
    oob_report,
    run_backend,
    verify_certificate,
    write_repro,
)

__all__ = ["BackendReport", "CaseResult", "ConformInterrupted", "CorpusEntry", "GenOptions", "certificate", "corpus",
           "corpus_by_name", "diverges", "load_repro", "minimise", "oob_report", "programs",
           "random_program", "run_backend", "verify_certificate", "write_repro"]
