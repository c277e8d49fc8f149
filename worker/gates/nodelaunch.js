// Ribbit's launcher for JavaScript test runners: runs INSIDE the sandbox, as the main
// module of the node process that would have run the repository's runner binary.
//
// Started as `node <this file> <the runner's own arguments>` with fd 3 open on the run
// wrapper's stdout and RIBBIT_LAUNCH holding {"runner": "jest" | "mocha", "bin": "<the
// runner's binary under node_modules/.bin>", "cap": <report size cap>, "args": [Ribbit's
// report and selection arguments, "{report}" standing for the report's place]}. The
// runner is called through its own command-line entry point (jest-cli's run(argv),
// mocha's lib/cli/cli.js main(argv)) with the repository's arguments plus Ribbit's, so
// the runner parses both exactly as its binary would; process.argv stays what the plain
// command gives the tests (node, the binary, the repository's arguments), because tests
// that parse process.argv (commander's do) fail on an argument they do not know.
//
// The report never touches the file system, so nothing the tests start can find or
// replace it (not by the environment, /proc/<pid>/{environ,cmdline,fd} or a scan of
// /tmp): its "place" is a name under /proc/self that cannot be created, and the one
// write the runner makes there is caught here in memory. What the run says goes out on
// fd 3 as the pytest bootstrap's channel does (worker/gates/watch.py): a fresh key first,
// before any repository code loads, then records signed with it when the process exits:
// the report, then its end. Code that starts later can add to
// fd 3 but not sign, and a report written there twice, or a write function replaced
// after this file took it, is a tamper record. mocha's failing tests are counted here
// as they fail, from the runner's own events, and the end record carries that count: a
// report with fewer failing tests is not the run's own, however it was rewritten on its
// way out (a wrapper that puts fs's functions back before the exit check). Code in the
// runner's own process can still change the runner's objects: node has no audit hooks
// (README.md says so).
'use strict';

const fs = require('fs');
const path = require('path');
const crypto = require('crypto');
const { EventEmitter } = require('events');
const { Writable } = require('stream');

// Taken now, before any repository code can rebind them.
const writeSync = fs.writeSync;
const createHmac = crypto.createHmac;
const prependListener = EventEmitter.prototype.prependListener;
const CHANNEL = 3;
const REPORT = '/proc/self/ribbit-report';

const channel = (() => {
  const key = crypto.randomBytes(32);
  let sequence = 0;
  const put = (text) => {
    const data = Buffer.from(text);
    for (let at = 0; at < data.length; ) at += writeSync(CHANNEL, data, at);
  };
  put(`\nribbit1 0 key ${key.toString('base64')} -\n`);
  return (kind, payload) => {
    sequence += 1;
    const body = `${sequence} ${kind} ${Buffer.from(payload).toString('base64')}`;
    put(`\nribbit1 ${body} ${createHmac('sha256', key).update(body).digest('hex')}\n`);
  };
})();

const launch = JSON.parse(process.env.RIBBIT_LAUNCH || 'null');
delete process.env.RIBBIT_LAUNCH;
const cap = (launch && launch.cap) || 0;
const caught = { chunks: null, opened: 0, tamper: [] };

function tamper(what) {
  caught.tamper.push({ mechanism: 'report-channel', what, path: null, line: 0 });
}

function opened() {
  caught.opened += 1;
  if (caught.opened > 1) tamper('the report was written more than once');
  caught.chunks = [];
  return caught.chunks;
}

const realWriteFileSync = fs.writeFileSync;
const realCreateWriteStream = fs.createWriteStream;
function writeFileSync(file, data, ...rest) {
  if (file !== REPORT) return realWriteFileSync.call(fs, file, data, ...rest);
  opened().push(Buffer.from(data));
}
function createWriteStream(file, ...rest) {
  if (file !== REPORT) return realCreateWriteStream.call(fs, file, ...rest);
  const chunks = opened();
  return new Writable({
    write(chunk, encoding, done) {
      chunks.push(Buffer.from(chunk, encoding));
      done();
    },
  });
}
fs.writeFileSync = writeFileSync;
fs.createWriteStream = createWriteStream;

// Sent from the first 'exit' listener, once the runner has written its report. The
// exit status is not known yet (mocha sets it in a listener of its own, added later):
// the run wrapper reads it, and a status of 0 with failing tests in the report is tamper.
let sent = false;
process.on('exit', () => {
  if (sent) return;
  sent = true;
  if (fs.writeFileSync !== writeFileSync || fs.createWriteStream !== createWriteStream) {
    tamper("fs's write functions were replaced while the runner ran");
  }
  for (const event of caught.tamper) channel('tamper', JSON.stringify(event));
  if (caught.chunks !== null) {
    const report = Buffer.concat(caught.chunks);
    channel(report.length > cap ? 'oversize' : 'report', report.length > cap ? '' : report);
  }
  channel('end', JSON.stringify({ status: 0, failed: failedTests.size }));
});

// mocha's tests that failed, one entry per suite and title (a report's ids), so a test
// that fails twice (done() called twice) counts once. Hooks are left out: a hook's
// title changes with the test it ran for, so counting them could exceed the report.
const failedTests = new Set();
function countFailures(runnerFile) {
  if (!fs.existsSync(runnerFile)) return;
  const Runner = require(runnerFile);
  const run = Runner && Runner.prototype && Runner.prototype.run;
  if (typeof run !== 'function') return;
  Runner.prototype.run = function (...rest) {
    prependListener.call(this, 'fail', (test) => {
      if (!test || test.type !== 'test' || !test.parent) return;
      failedTests.add(`${test.parent.fullTitle()}\0${test.title}`);
    });
    return run.apply(this, rest);
  };
}

function fail(message) {
  process.stderr.write(`ribbit: ${message}\n`);
  process.exit(97);
}

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
const args = [...own, ...launch.args.map((a) => a.replace('{report}', REPORT))];

if (launch.runner === 'jest') {
  // What jest-cli's bin/jest.js does before calling run().
  if (process.env.NODE_ENV == null) process.env.NODE_ENV = 'test';
  const jest = require(pkg);
  if (typeof jest.run !== 'function') fail(`${pkg} has no run(): not a jest Ribbit knows`);
  jest.run(args);
} else if (launch.runner === 'mocha') {
  const cli = path.join(pkg, 'lib', 'cli', 'cli.js');
  if (!fs.existsSync(cli)) fail(`${cli} not found: a mocha before 6 is not supported`);
  countFailures(path.join(pkg, 'lib', 'runner.js'));
  require(cli).main(args);
} else {
  fail(`unknown runner ${launch.runner}`);
}
