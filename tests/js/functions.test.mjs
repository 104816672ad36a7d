// supabase-js's functions.invoke against rowgate's /functions/v1 (tests/it/functions.rs starts
// the server on PostgreSQL and passes its URL, its anon key and two users' tokens): the
// template, a function that reads the database as its caller, and errors as supabase-js
// reports them.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import WebSocket from 'ws'
import { createClient, FunctionsHttpError } from '@supabase/supabase-js'

const URL_ = process.env.ROWGATE_URL
const ANON = process.env.ANON_KEY
const as = (token) =>
  createClient(URL_, ANON, {
    auth: { persistSession: false, autoRefreshToken: false },
    realtime: { transport: WebSocket },
    global: token ? { headers: { Authorization: `Bearer ${token}` } } : {},
  })

test('the template answers functions.invoke', async () => {
  const { data, error } = await as().functions.invoke('hello', { body: { name: 'Functions' } })
  assert.equal(error, null)
  assert.deepEqual(data, { message: 'Hello Functions!' })
})

test('a function reads the database as its caller, under row-level security', async () => {
  let { data, error } = await as(process.env.ALICE_TOKEN).functions.invoke('todos')
  assert.equal(error, null, error && (await error.context.text()))
  assert.deepEqual(data, [{ task: 'alice: buy tea' }, { task: 'alice: write docs' }])
  ;({ data, error } = await as(process.env.BOB_TOKEN).functions.invoke('todos', { method: 'GET' }))
  assert.equal(error, null)
  assert.deepEqual(data, [{ task: 'bob: fix bike' }])
  ;({ data, error } = await as().functions.invoke('todos'))
  assert.deepEqual(data, [])
})

test('errors are FunctionsHttpError with the answer in their context', async () => {
  let { data, error } = await as().functions.invoke('throws')
  assert.equal(data, null)
  assert.ok(error instanceof FunctionsHttpError)
  assert.equal(error.context.status, 500)
  ;({ error } = await as().functions.invoke('no-such-function'))
  assert.ok(error instanceof FunctionsHttpError)
  assert.equal(error.context.status, 404)
  assert.deepEqual(await error.context.json(), { code: 'NOT_FOUND', message: 'Requested function was not found' })
  ;({ error } = await createClient(URL_, 'not-a-key', { auth: { persistSession: false }, realtime: { transport: WebSocket } }).functions.invoke('hello', { body: {} }))
  assert.ok(error instanceof FunctionsHttpError)
  assert.equal(error.context.status, 401)
})

test('a sub-path, a method and a text body reach the function', async () => {
  const { data, error } = await as().functions.invoke('echo/items/7?full=1', { method: 'PATCH', body: 'plain text' })
  assert.equal(error, null)
  assert.equal(data.method, 'PATCH')
  assert.equal(data.path, '/echo/items/7')
  assert.equal(data.search, '?full=1')
  assert.equal(data.body, 'plain text')
  assert.equal(data.apikey, ANON)
})
