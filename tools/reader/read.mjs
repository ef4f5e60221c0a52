#!/usr/bin/env node
// read.mjs — an independent reader of codapipe shards, used by the Go tests
// (internal/contract/shard/shardtest) to check what the Go writer produced with code
// that shares nothing with it: Arrow IPC files are read with the apache-arrow
// package, Parquet files with DuckDB (@duckdb/node-api).
//
//   node read.mjs FILE...
//
// For every FILE it prints one line of JSON (JSON Lines), in argument order:
//
//   {"file": "...", "format": "arrow" | "parquet",
//    "metadata": {"key": "value", ...},   // Arrow schema metadata, or the Parquet key-value metadata
//    "schema": [{"name": "...", "type": "...", "nullable": true}, ...],
//    "num_rows": N,
//    "rows": [{"column": value, ...}, ...]}
//
// Values: null for nulls; strings, booleans and numbers as JSON; binary as
// base64 strings; lists as arrays; structs as objects; 64-bit integers
// (BigInt) as decimal strings. A float is printed in JavaScript's shortest
// round-trip form, so parsing it gives back the same float64 bits, except
// three values JSON cannot write: -0 is printed as the number -0, and NaN,
// Infinity and -Infinity as the strings "NaN", "Infinity", "-Infinity".
// The format is chosen by the file's extension (.arrow/.arrows/.feather,
// .parquet). Errors go to stderr with exit status 1.

import { readFileSync } from 'node:fs';
import { extname } from 'node:path';
import { tableFromIPC, DataType } from 'apache-arrow';
import {
  DuckDBInstance, DuckDBBlobValue, DuckDBListValue, DuckDBArrayValue, DuckDBStructValue, DuckDBMapValue,
} from '@duckdb/node-api';

// json serialises v like JSON.stringify, but keeps -0, writes non-finite
// numbers as strings, BigInts as decimal strings and bytes as base64.
function json(v) {
  if (v === null || v === undefined) return 'null';
  switch (typeof v) {
    case 'number':
      if (Object.is(v, -0)) return '-0';
      if (Number.isNaN(v)) return '"NaN"';
      if (v === Infinity) return '"Infinity"';
      if (v === -Infinity) return '"-Infinity"';
      return String(v); // shortest round-trip form, as JSON.stringify
    case 'bigint':
      return JSON.stringify(v.toString());
    case 'string':
    case 'boolean':
      return JSON.stringify(v);
    default:
      break;
  }
  if (v instanceof Uint8Array) return JSON.stringify(Buffer.from(v.buffer, v.byteOffset, v.byteLength).toString('base64'));
  if (Array.isArray(v)) return '[' + v.map(json).join(',') + ']';
  if (v instanceof Map) v = Object.fromEntries(v);
  return '{' + Object.entries(v).map(([k, x]) => JSON.stringify(k) + ':' + json(x)).join(',') + '}';
}

// arrowValue converts one value of an apache-arrow vector of type t into
// plain JavaScript (arrays, objects, Uint8Array, numbers, BigInts).
function arrowValue(v, t) {
  if (v === null || v === undefined) return null;
  if (DataType.isList(t) || DataType.isLargeList(t) || DataType.isFixedSizeList(t)) {
    const child = t.children[0].type;
    return Array.from(v, (x) => arrowValue(x, child));
  }
  if (DataType.isStruct(t)) {
    const o = {};
    for (const f of t.children) o[f.name] = arrowValue(v[f.name], f.type);
    return o;
  }
  if (DataType.isMap(t)) {
    const o = {};
    for (const [k, x] of v) o[String(k)] = arrowValue(x, t.children[0].type.children[1].type);
    return o;
  }
  if (DataType.isBinary(t) || DataType.isFixedSizeBinary(t) || DataType.isLargeBinary(t)) {
    return new Uint8Array(v);
  }
  return v; // utf8, bool, numbers, BigInt
}

function readArrow(path) {
  const table = tableFromIPC(readFileSync(path));
  const fields = table.schema.fields;
  const metadata = Object.fromEntries(table.schema.metadata);
  const schema = fields.map((f) => ({ name: f.name, type: String(f.type), nullable: f.nullable }));
  const cols = fields.map((_, i) => table.getChildAt(i));
  const rows = [];
  for (let r = 0; r < table.numRows; r++) {
    const row = {};
    fields.forEach((f, i) => { row[f.name] = arrowValue(cols[i].get(r), f.type); });
    rows.push(row);
  }
  return { file: path, format: 'arrow', metadata, schema, num_rows: table.numRows, rows };
}

// duckValue converts a @duckdb/node-api value into plain JavaScript. Lists,
// structs, maps and blobs are classes of the package; other values are
// JavaScript primitives already (numbers for INTEGER/DOUBLE, bigint for
// BIGINT, strings for VARCHAR, booleans).
function duckValue(v) {
  if (v === null || v === undefined) return null;
  if (typeof v !== 'object') return v;
  if (v instanceof DuckDBBlobValue) return v.bytes;
  if (v instanceof DuckDBListValue || v instanceof DuckDBArrayValue) return v.items.map(duckValue);
  if (v instanceof DuckDBStructValue) {
    const o = {};
    for (const [k, x] of Object.entries(v.entries)) o[k] = duckValue(x);
    return o;
  }
  if (v instanceof DuckDBMapValue) {
    const o = {};
    for (const { key, value } of v.entries) o[String(key)] = duckValue(value);
    return o;
  }
  return String(v); // dates, decimals, ...: their text form
}

let duck; // one in-memory DuckDB connection for every Parquet file

function sqlString(s) {
  return "'" + s.replaceAll("'", "''") + "'";
}

async function readParquet(path) {
  if (!duck) duck = await (await DuckDBInstance.create(':memory:')).connect();
  const p = sqlString(path);
  // file_row_number restores the file's row order whatever DuckDB's scan order.
  const res = await duck.runAndReadAll(
    `SELECT * EXCLUDE (file_row_number) FROM read_parquet(${p}, file_row_number = true) ORDER BY file_row_number`);
  const names = res.columnNames();
  const types = res.columnTypes();
  const schema = names.map((name, i) => ({ name, type: String(types[i]), nullable: true }));
  const rows = res.getRows().map((vals) => {
    const row = {};
    names.forEach((name, i) => { row[name] = duckValue(vals[i]); });
    return row;
  });
  const metadata = {};
  const kv = await duck.runAndReadAll(`SELECT key, value FROM parquet_kv_metadata(${p})`);
  const dec = new TextDecoder('utf-8', { fatal: false });
  for (const [k, v] of kv.getRows()) {
    metadata[dec.decode(duckValue(k))] = dec.decode(duckValue(v));
  }
  return { file: path, format: 'parquet', metadata, schema, num_rows: rows.length, rows };
}

async function main(files) {
  if (files.length === 0) {
    process.stderr.write('usage: node read.mjs FILE...\n');
    process.exit(2);
  }
  for (const f of files) {
    const ext = extname(f).toLowerCase();
    let doc;
    if (ext === '.parquet') doc = await readParquet(f);
    else if (ext === '.arrow' || ext === '.arrows' || ext === '.feather') doc = readArrow(f);
    else throw new Error(`${f}: unknown extension ${ext} (want .arrow or .parquet)`);
    process.stdout.write(json(doc) + '\n');
  }
}

main(process.argv.slice(2)).catch((err) => {
  process.stderr.write(`read.mjs: ${err?.stack ?? err}\n`);
  process.exit(1);
});
