// Ribbit's launcher for JavaScript test runners: runs INSIDE the sandbox, as the main
// module of the node process that would have run the repository's runner binary.
//
// Started as `node <this file> <the runner's own arguments>` with RIBBIT_LAUNCH holding
// {"runner": "jest" | "mocha", "bin": "<the runner's binary under node_modules/.bin>",
//  "args": [Ribbit's report and selection arguments, "{report}" standing for
// $RIBBIT_JUNIT]}. The runner is called through its
// own command-line entry point (jest-cli's run(argv), mocha's lib/cli/cli.js main(argv))
// with the repository's arguments plus Ribbit's, so the runner parses both exactly as
// its binary would; process.argv stays what the plain command gives the tests
// (node, the binary, the repository's arguments), because tests that parse
// process.argv (commander's do) fail on an argument they do not know.
// Ribbit's variables leave the environment before any repository code loads, so the
// report's path is not in what the tests or their child processes read there.
'use strict';

const fs = require('fs');
const path = require('path');

function fail(message) {
  process.stderr.write(`ribbit: ${message}\n`);
  process.exit(97);
}

const launch = JSON.parse(process.env.RIBBIT_LAUNCH || 'null');
const report = process.env.RIBBIT_JUNIT || '';
delete process.env.RIBBIT_LAUNCH;
delete process.env.RIBBIT_JUNIT;
if (!launch) fail('no RIBBIT_LAUNCH');

const bin = path.resolve(launch.bin);
if (!fs.existsSync(bin)) fail(`${launch.bin} not found: is the set-up run (npm ci)?`);
// The package the binary belongs to (.bin/jest -> jest/bin/jest.js -> jest).
let pkg = path.dirname(fs.realpathSync(bin));
while (!fs.existsSync(path.join(pkg, 'package.json')) && pkg !== path.dirname(pkg)) {
  pkg = path.dirname(pkg);
}
const own = process.argv.slice(2);
process.argv = [process.argv[0], bin, ...own];
const args = [...own, ...launch.args.map((a) => a.replace('{report}', report))];

if (launch.runner === 'jest') {
  // What jest-cli's bin/jest.js does before calling run().
  if (process.env.NODE_ENV == null) process.env.NODE_ENV = 'test';
  const jest = require(pkg);
  if (typeof jest.run !== 'function') fail(`${pkg} has no run(): not a jest Ribbit knows`);
  jest.run(args);
} else if (launch.runner === 'mocha') {
  const cli = path.join(pkg, 'lib', 'cli', 'cli.js');
  if (!fs.existsSync(cli)) fail(`${cli} not found: a mocha before 6 is not supported`);
  require(cli).main(args);
} else {
  fail(`unknown runner ${launch.runner}`);
}
