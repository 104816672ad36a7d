// The reads an application makes with the real postgrest-js client (supabase-js's query
// builder), against a rowgate the Rust harness started: ROWGATE_URL points at it.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { PostgrestClient } from '@supabase/postgrest-js';

const url = process.env.ROWGATE_URL;
if (!url) throw new Error('ROWGATE_URL is not set; run these tests through `cargo test` (tests/it/postgrest_js.rs)');
const db = new PostgrestClient(url, { schema: 'test' });

test('select columns with filters and order', async () => {
  const { data, error, status } = await db.from('items').select('id, name').lt('id', 4).order('id', { ascending: false });
  assert.equal(error, null);
  assert.equal(status, 200);
  assert.deepEqual(data, [{ id: 3, name: 'apple' }, { id: 2, name: 'screwdriver' }, { id: 1, name: 'hammer' }]);
});

test('renames, casts and JSON paths', async () => {
  const { data, error } = await db.from('items').select('id, label:name, price::text, color:data->>color').eq('id', 1);
  assert.equal(error, null);
  assert.deepEqual(data, [{ id: 1, label: 'hammer', price: '12.50', color: 'red' }]);
});

test('in, is, like, ilike, not and or', async () => {
  let r = await db.from('items').select('id').in('id', [1, 3, 5]).order('id');
  assert.deepEqual(r.data, [{ id: 1 }, { id: 3 }, { id: 5 }]);
  r = await db.from('items').select('id').is('price', null).order('id');
  assert.deepEqual(r.data, [{ id: 7 }, { id: 20 }]);
  r = await db.from('items').select('name').ilike('name', 'HAM%');
  assert.deepEqual(r.data, [{ name: 'hammer' }]);
  r = await db.from('items').select('id').not('id', 'gte', 3).order('id');
  assert.deepEqual(r.data, [{ id: 1 }, { id: 2 }]);
  r = await db.from('items').select('id').or('id.eq.2,and(id.gt.17,id.lt.19)').order('id');
  assert.deepEqual(r.data, [{ id: 2 }, { id: 18 }]);
});

test('array containment and full-text search', async () => {
  let r = await db.from('items').select('id').contains('tags', ['food', 'fruit']).order('id');
  assert.deepEqual(r.data, [{ id: 3 }, { id: 4 }]);
  r = await db.from('articles').select('id').textSearch('tsv', 'cats', { config: 'english' }).order('id');
  assert.equal(r.error, null);
  assert.ok(r.data.length > 0);
  r = await db.from('articles').select('id').textSearch('body', "'fat cats'", { type: 'websearch', config: 'english' });
  assert.equal(r.error, null);
  assert.deepEqual(r.data, [{ id: 1 }]);
});

test('pagination with range and exact count', async () => {
  const { data, count, status, error } = await db.from('items').select('id', { count: 'exact' }).order('id').range(2, 4);
  assert.equal(error, null);
  assert.equal(status, 206);
  assert.equal(count, 20);
  assert.deepEqual(data, [{ id: 3 }, { id: 4 }, { id: 5 }]);
});

test('head request for a count only', async () => {
  const { data, count, error } = await db.from('items').select('*', { count: 'exact', head: true }).lt('id', 6);
  assert.equal(error, null);
  assert.equal(data, null);
  assert.equal(count, 5);
});

test('single and maybeSingle', async () => {
  let r = await db.from('items').select('id, name').eq('id', 2).single();
  assert.deepEqual(r.data, { id: 2, name: 'screwdriver' });
  r = await db.from('items').select('id').eq('id', 999).single();
  assert.equal(r.status, 406);
  assert.equal(r.error.code, 'PGRST116');
  r = await db.from('items').select('id').eq('id', 999).maybeSingle();
  assert.equal(r.error, null);
  assert.equal(r.data, null);
});

test('csv output', async () => {
  const { data, error } = await db.from('items').select('id,name').lt('id', 3).order('id').csv();
  assert.equal(error, null);
  assert.equal(data, 'id,name\n1,hammer\n2,screwdriver');
});

test('another schema with schema()', async () => {
  const { data, error } = await db.schema('v2').from('items').select('name').eq('id', 1);
  assert.equal(error, null);
  assert.deepEqual(data, [{ name: 'v2 hammer' }]);
});

test('row-level security with request headers', async () => {
  const tenant = new PostgrestClient(url, { schema: 'test', headers: { 'X-Tenant': 'bob' } });
  const { data } = await tenant.from('documents').select('id').order('id');
  assert.deepEqual(data, [{ id: 1 }, { id: 3 }, { id: 4 }]);
});

test('errors come back as PostgREST errors', async () => {
  let r = await db.from('items').select('nope');
  assert.equal(r.status, 400);
  assert.equal(r.error.code, '42703');
  r = await db.from('itemz').select('*');
  assert.equal(r.status, 404);
  assert.equal(r.error.code, 'PGRST205');
  r = await db.from('secrets').select('*');
  assert.equal(r.status, 401);
  assert.equal(r.error.code, '42501');
});

test('rpc: scalar, set of rows with filters, GET and HEAD', async () => {
  let r = await db.rpc('add_them', { a: 1, b: 2 });
  assert.equal(r.error, null);
  assert.equal(r.data, 3);
  r = await db.rpc('items_cheaper_than', { max_price: 1 }).select('id, name').lt('id', 5).order('id');
  assert.equal(r.error, null);
  assert.deepEqual(r.data, [{ id: 3, name: 'apple' }, { id: 4, name: 'banana' }]);
  r = await db.rpc('task_titles', {}, { get: true });
  assert.deepEqual(r.data, ['design', 'build', 'test', 'ship']);
  r = await db.rpc('items_cheaper_than', { max_price: 1 }, { head: true, count: 'exact' });
  assert.equal(r.error, null);
  assert.equal(r.count, 4);
  r = await db.rpc('nope', { a: 1 });
  assert.equal(r.error.code, 'PGRST202');
});

test('explain() returns the plan', async () => {
  const { data, error } = await db.from('items').select('id').eq('id', 1).explain({ format: 'json', analyze: true });
  assert.equal(error, null);
  assert.ok(data[0].Plan, JSON.stringify(data));
});
