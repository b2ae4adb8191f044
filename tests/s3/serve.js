'use strict';
// The S3 server of tidemark's integration tests: s3rver's command line
// (the package ships its CLI module but no bin script).
require('@20minutes/s3rver/lib/cli').parseAsync(process.argv);
