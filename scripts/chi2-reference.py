#!/usr/bin/env python3
"""SciPy's answer for A/B tests' chi-squared tests, to compare RichPush's with.

    scripts/chi2-reference.py < tables.json

Reads a JSON list of contingency tables on standard input (each a list of rows of counts: for an
A/B test, a row per variant, [users with the metric, users without]) and prints a JSON list with,
for each table, scipy.stats.chi2_contingency(table, correction=False)'s statistic, p-value and
degrees of freedom: {"statistic","pValue","dof"}. Where SciPy refuses the table (a row or column
of zeros makes an expected count of zero; an empty table gives NaN), {"statistic":null,"pValue":null,"error":"..."}: RichPush
answers a statistic of 0 and a p-value of 1 there (docs/api.md#ab-tests-and-conversions).
Floats are printed with repr's precision (they read back exactly).

Tests/RichPushCoreTests/ChiSquaredTests.swift and Tests/RichPushServerTests/ExperimentTests.swift
run it (through Tests/TestSupport/ChiSquaredReference.swift).
"""

import json
import math
import sys
import warnings

from scipy.stats import chi2_contingency


def main() -> int:
    tables = json.load(sys.stdin)
    answers = []
    for table in tables:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)  # 0/0 in an empty table, answered below
                result = chi2_contingency(table, correction=False)
        except ValueError as error:
            answers.append({"statistic": None, "pValue": None, "error": str(error)})
            continue
        if not (math.isfinite(result.statistic) and math.isfinite(result.pvalue)):
            # An empty table: SciPy answers NaN rather than refusing it.
            answers.append({"statistic": None, "pValue": None, "error": "no test: the table is empty (NaN)"})
            continue
        answers.append({"statistic": float(result.statistic), "pValue": float(result.pvalue), "dof": int(result.dof)})
    json.dump(answers, sys.stdout)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
