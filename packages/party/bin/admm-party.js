#!/usr/bin/env -S MALLOC_MMAP_THRESHOLD_=4194304 node --max-semi-space-size=2 --single-threaded-gc --expose-gc
import "../dist/cli.js";
