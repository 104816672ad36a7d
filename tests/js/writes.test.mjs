// The writes an application makes with the real postgrest-js client, against the rowgate the
// Rust harness started (ROWGATE_URL). These tests own the `notes` ids 900 to 999.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { PostgrestClient } from '@supabase/postgrest-js';

const url = process.env.ROWGATE_URL;
if (!url) throw new Error('ROWGATE_URL is not set; run these tests through `cargo test` (tests/it/postgrest_js.rs)');
const db = new PostgrestClient(url, { schema: 'test' });

test('insert and select the new row', async () => {
  const { data, error, status } = await db.from('notes').insert({ id: 900, body: 'first' }).select('id, body, author').single();
  assert.equal(error, null);
  assert.equal(status, 201);
  assert.deepEqual(data, { id: 900, body: 'first', author: 'anonymous' });
});

test('bulk insert with defaults for missing keys', async () => {
  const { data, error } = await db
    .from('notes')
    .insert([{ id: 901, body: 'a' }, { id: 902, body: 'b', author: 'bo' }], { defaultToNull: false })
    .select('id, author');
  assert.equal(error, null);
  assert.deepEqual(data, [{ id: 901, author: 'anonymous' }, { id: 902, author: 'bo' }]);
});

test('upsert merges on the primary key', async () => {
  await db.from('notes').insert({ id: 903, body: 'old' });
  const { data, error, status } = await db.from('notes').upsert({ id: 903, body: 'new' }).select('id, body');
  assert.equal(error, null);
  assert.equal(status, 200);
  assert.deepEqual(data, [{ id: 903, body: 'new' }]);
});

test('update and delete with filters', async () => {
  await db.from('notes').insert([{ id: 904, body: 'x' }, { id: 905, body: 'y' }]);
  let r = await db.from('notes').update({ author: 'ed' }).eq('id', 904).select('id, author');
  assert.equal(r.error, null);
  assert.deepEqual(r.data, [{ id: 904, author: 'ed' }]);
  r = await db.from('notes').delete().in('id', [904, 905]).select('id');
  assert.equal(r.error, null);
  // A write returns its rows in the order the table gave them up, as in PostgREST.
  assert.deepEqual(r.data.sort((a, b) => a.id - b.id), [{ id: 904 }, { id: 905 }]);
  r = await db.from('notes').select('id').in('id', [904, 905]);
  assert.deepEqual(r.data, []);
});

test('a constraint violation is an error and writes nothing', async () => {
  const { error, status } = await db.from('notes').insert([{ id: 906, body: 'ok' }, { id: 907, body: 'forbidden' }]);
  assert.equal(status, 400);
  assert.equal(error.code, '23514');
  const r = await db.from('notes').select('id').in('id', [906, 907]);
  assert.deepEqual(r.data, []);
});

test('maxAffected refuses a wider change', async () => {
  await db.from('notes').insert([{ id: 908, body: 'a' }, { id: 909, body: 'b' }]);
  const { error, status } = await db.from('notes').update({ author: 'z' }).in('id', [908, 909]).maxAffected(1);
  assert.equal(status, 400);
  assert.equal(error.code, 'PGRST124');
  const r = await db.from('notes').select('author').in('id', [908, 909]);
  assert.deepEqual(r.data, [{ author: 'anonymous' }, { author: 'anonymous' }]);
});

test('rollback returns the result and keeps nothing', async () => {
  const { data, error } = await db.from('notes').insert({ id: 910, body: 'gone' }).select('id').rollback();
  assert.equal(error, null);
  assert.deepEqual(data, [{ id: 910 }]);
  const r = await db.from('notes').select('id').eq('id', 910);
  assert.deepEqual(r.data, []);
});
