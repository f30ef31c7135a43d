#!/usr/bin/env -S node --initial-old-space-size=128
import "../dist/cli.js";
