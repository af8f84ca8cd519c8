#!/usr/bin/env node
// Lints a Dockerfile with dockerfile-utils (the validator behind the VS Code
// Docker extension): node lint-dockerfile.js [Dockerfile]. Every diagnostic,
// warning or error, fails the check (exit 1): the project's Dockerfile is
// kept clean.
"use strict";

const fs = require("fs");
const { validate, ValidationSeverity } = require("dockerfile-utils");

const file = process.argv[2] || "Dockerfile";
let text;
try { text = fs.readFileSync(file, "utf8"); } catch (e) {
  console.error(`lint-dockerfile: cannot read ${file}: ${e.message}`);
  process.exit(2);
}
// A warning for every rule that has a level, so that nothing passes quietly.
const W = ValidationSeverity.WARNING;
const diagnostics = validate(text, {
  deprecatedMaintainer: W,
  directiveCasing: W,
  emptyContinuationLine: W,
  instructionCasing: W,
  instructionCmdMultiple: W,
  instructionEntrypointMultiple: W,
  instructionHealthcheckMultiple: W,
  instructionJSONInSingleQuotes: W,
  instructionWorkdirRelative: W,
});
for (const d of diagnostics) {
  console.log(`${file}:${d.range.start.line + 1}:${d.range.start.character + 1}: ${d.message}`);
}
console.error(`lint-dockerfile: ${file}: ${diagnostics.length} diagnostics`);
process.exitCode = diagnostics.length === 0 ? 0 : 1;
