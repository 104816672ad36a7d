// The real @supabase/storage-js client against rowgate's /storage/v1 (tests/it/storage.rs starts
// the server and passes its URL and tokens): buckets, uploads, row-level security between two
// users, limits, public and signed URLs, moves, copies, listings, deletions, image transforms.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import http from 'node:http'
import zlib from 'node:zlib'
import { StorageClient } from '@supabase/storage-js'

const URL_ = process.env.ROWGATE_STORAGE_URL
const client = (token) => new StorageClient(URL_, { Authorization: `Bearer ${token}` })
const service = client(process.env.SERVICE_TOKEN)
const alice = client(process.env.ALICE_TOKEN)
const bob = client(process.env.BOB_TOKEN)
const ALICE = process.env.ALICE_SUB
const run = process.env.RUN_ID

const text = async (blob) => Buffer.from(await blob.arrayBuffer()).toString()
const sleep = (ms) => new Promise((r) => setTimeout(r, ms))

const bucket = (name) => `${name}-${run}`

test('buckets: create, read, update, list, delete', async () => {
  const id = bucket('docs')
  let { data, error } = await service.createBucket(id, { public: false, fileSizeLimit: '1mb' })
  assert.equal(error, null)
  assert.deepEqual(data, { name: id })
  ;({ data, error } = await service.getBucket(id))
  assert.equal(error, null)
  assert.equal(data.id, id)
  assert.equal(data.public, false)
  assert.equal(data.file_size_limit, 1000000)
  ;({ data, error } = await service.updateBucket(id, { public: true, fileSizeLimit: '20mb' }))
  assert.deepEqual(data, { message: 'Successfully updated' })
  ;({ data } = await service.getBucket(id))
  assert.equal(data.public, true)
  assert.equal(data.file_size_limit, 20000000)
  ;({ data } = await service.listBuckets())
  assert.ok(data.some((b) => b.id === id))
  ;({ error } = await service.createBucket(id))
  assert.equal(error.statusCode, '409')
  ;({ data, error } = await service.deleteBucket(id))
  assert.deepEqual(data, { message: 'Successfully deleted' })
  ;({ error } = await service.getBucket(id))
  assert.equal(error.message, 'Bucket not found')
})

test('uploads are each user\'s own under row-level security', async () => {
  const id = bucket('private')
  await service.createBucket(id)
  const path = `${ALICE}/notes.txt`
  let { data, error } = await alice.from(id).upload(path, 'hello from alice', { contentType: 'text/plain' })
  assert.equal(error, null)
  assert.equal(data.path, path)
  assert.equal(data.fullPath, `${id}/${path}`)
  ;({ data, error } = await alice.from(id).download(path))
  assert.equal(error, null)
  assert.equal(await text(data), 'hello from alice')
  // Bob sees nothing of Alice's: not the object, not its folder, not its info.
  ;({ data, error } = await bob.from(id).download(path))
  assert.equal(error.message, 'Object not found')
  ;({ data } = await bob.from(id).list(ALICE))
  assert.deepEqual(data, [])
  ;({ data } = await bob.from(id).list())
  assert.deepEqual(data, [])
  ;({ data } = await alice.from(id).list())
  assert.deepEqual(data.map((e) => [e.name, e.id]), [[ALICE, null]])
  ;({ data } = await alice.from(id).list(ALICE))
  assert.deepEqual(data.map((e) => e.name), ['notes.txt'])
  assert.equal(data[0].metadata.size, 16)
  // Bob may not write in Alice's name, nor delete her object.
  ;({ error } = await bob.from(id).upload(path, 'bob was here', { upsert: true }))
  assert.equal(error.statusCode, '403')
  ;({ data } = await bob.from(id).remove([path]))
  assert.deepEqual(data, [])
  ;({ data } = await alice.from(id).download(path))
  assert.equal(await text(data), 'hello from alice')
})

test('an existing object is replaced only with upsert', async () => {
  const id = bucket('upserts')
  await service.createBucket(id)
  const path = `${ALICE}/a.txt`
  await alice.from(id).upload(path, 'one')
  let { error } = await alice.from(id).upload(path, 'two')
  assert.equal(error.statusCode, '409')
  assert.equal(error.message, 'The resource already exists')
  ;({ error } = await alice.from(id).upload(path, 'three', { upsert: true }))
  assert.equal(error, null)
  let { data } = await alice.from(id).download(path)
  assert.equal(await text(data), 'three')
  ;({ error } = await alice.from(id).update(path, new Blob(['four'], { type: 'text/plain' })))
  assert.equal(error, null)
  ;({ data } = await alice.from(id).download(path))
  assert.equal(await text(data), 'four')
  ;({ data } = await alice.from(id).info(path))
  assert.equal(data.size, 4)
  assert.equal(data.contentType, 'text/plain')
})

test('size and media type limits', async () => {
  const id = bucket('limits')
  await service.createBucket(id, { fileSizeLimit: '1kb', allowedMimeTypes: ['image/*'] })
  let { error } = await alice.from(id).upload(`${ALICE}/big.png`, Buffer.alloc(2000), { contentType: 'image/png' })
  assert.equal(error.statusCode, '413')
  assert.equal(error.message, 'The object exceeded the maximum allowed size')
  ;({ error } = await alice.from(id).upload(`${ALICE}/page.html`, '<p>hi</p>', { contentType: 'text/html' }))
  assert.equal(error.statusCode, '415')
  assert.equal(error.message, 'mime type text/html is not supported')
  ;({ error } = await alice.from(id).upload(`${ALICE}/ok.png`, Buffer.alloc(100), { contentType: 'image/png' }))
  assert.equal(error, null)
  ;({ error } = await alice.from(bucket('nowhere')).upload(`${ALICE}/x.txt`, 'x'))
  assert.equal(error.message, 'Bucket not found')
})

test('public buckets serve anyone; private ones only by signed URL', async () => {
  const pub = bucket('public')
  const priv = bucket('signed')
  await service.createBucket(pub, { public: true })
  await service.createBucket(priv)
  const path = `${ALICE}/logo.png`
  const png = Buffer.from([0x89, 0x50, 0x4e, 0x47, 1, 2, 3, 4])
  await alice.from(pub).upload(path, png, { contentType: 'image/png' })
  await alice.from(priv).upload(path, png, { contentType: 'image/png' })
  const { data: publicUrl } = alice.from(pub).getPublicUrl(path)
  let r = await fetch(publicUrl.publicUrl)
  assert.equal(r.status, 200)
  assert.equal(r.headers.get('content-type'), 'image/png')
  assert.deepEqual(Buffer.from(await r.arrayBuffer()), png)
  r = await fetch(alice.from(priv).getPublicUrl(path).data.publicUrl)
  assert.equal(r.status, 400)
  assert.equal((await r.json()).message, 'Bucket not found')
  const { data: signed, error } = await alice.from(priv).createSignedUrl(path, 2)
  assert.equal(error, null)
  r = await fetch(signed.signedUrl)
  assert.equal(r.status, 200)
  assert.deepEqual(Buffer.from(await r.arrayBuffer()), png)
  // A signed URL for one object opens no other.
  r = await fetch(signed.signedUrl.replace('logo.png', 'other.png'))
  assert.equal((await r.json()).message, 'Invalid signature')
  await sleep(3100)
  r = await fetch(signed.signedUrl)
  assert.equal(r.status, 400)
  assert.equal((await r.json()).message, '"exp" claim timestamp check failed')
  // Bob cannot sign what he cannot read.
  const { error: refused } = await bob.from(priv).createSignedUrl(path, 60)
  assert.equal(refused.message, 'Object not found')
  const { data: many } = await alice.from(priv).createSignedUrls([path, `${ALICE}/missing.png`], 60)
  assert.equal(many[0].error, null)
  assert.ok(many[0].signedUrl.includes('token='))
  assert.equal(many[1].signedUrl, null)
  assert.equal(many[1].error, 'Either the object does not exist or you do not have access to it')
})

test('signed upload URLs take one upload', async () => {
  const id = bucket('dropbox')
  await service.createBucket(id)
  const path = `${ALICE}/drop.txt`
  const { data, error } = await alice.from(id).createSignedUploadUrl(path)
  assert.equal(error, null)
  let up = await service.from(id).uploadToSignedUrl(path, data.token, 'dropped in')
  assert.equal(up.error, null)
  assert.equal(up.data.fullPath, `${id}/${path}`)
  up = await service.from(id).uploadToSignedUrl(path, data.token, 'again')
  assert.equal(up.error.statusCode, '409')
  const { data: back } = await alice.from(id).download(path)
  assert.equal(await text(back), 'dropped in')
})

test('move, copy, list, exists, remove', async () => {
  const id = bucket('files')
  await service.createBucket(id)
  const dir = `${ALICE}/folder`
  for (const name of ['b.txt', 'a.txt', 'sub/c.txt']) {
    const { error } = await alice.from(id).upload(`${dir}/${name}`, name)
    assert.equal(error, null)
  }
  let { data } = await alice.from(id).list(dir)
  assert.deepEqual(data.map((e) => e.name), ['a.txt', 'b.txt', 'sub'])
  ;({ data } = await alice.from(id).list(dir, { search: 'b' }))
  assert.deepEqual(data.map((e) => e.name), ['b.txt'])
  ;({ data } = await alice.from(id).list(dir, { limit: 1, offset: 1 }))
  assert.deepEqual(data.map((e) => e.name), ['b.txt'])
  let { error } = await alice.from(id).move(`${dir}/a.txt`, `${dir}/moved.txt`)
  assert.equal(error, null)
  ;({ data } = await alice.from(id).exists(`${dir}/a.txt`))
  assert.equal(data, false)
  ;({ data } = await alice.from(id).exists(`${dir}/moved.txt`))
  assert.equal(data, true)
  ;({ data, error } = await alice.from(id).copy(`${dir}/b.txt`, `${dir}/copy.txt`))
  assert.equal(error, null)
  assert.equal(data.path, `${id}/${dir}/copy.txt`)
  ;({ data } = await alice.from(id).download(`${dir}/copy.txt`))
  assert.equal(await text(data), 'b.txt')
  ;({ error } = await alice.from(id).move(`${dir}/b.txt`, `${dir}/copy.txt`))
  assert.equal(error.statusCode, '409')
  ;({ data } = await alice.from(id).remove([`${dir}/b.txt`, `${dir}/copy.txt`, `${dir}/none.txt`]))
  assert.deepEqual(data.map((o) => o.name).sort(), [`${dir}/b.txt`, `${dir}/copy.txt`])
  ;({ data } = await alice.from(id).list(dir))
  assert.deepEqual(data.map((e) => e.name), ['moved.txt', 'sub'])
  ;({ error } = await service.deleteBucket(id))
  assert.equal(error.message, 'The bucket you tried to delete is not empty')
  ;({ data } = await service.emptyBucket(id))
  assert.equal(data.message, 'Successfully emptied')
  ;({ error } = await service.deleteBucket(id))
  assert.equal(error, null)
})

test('downloads honour Range and give streams', async () => {
  const id = bucket('ranges')
  await service.createBucket(id, { public: true })
  const path = `${ALICE}/digits.txt`
  await alice.from(id).upload(path, '0123456789', { contentType: 'text/plain' })
  const url = alice.from(id).getPublicUrl(path).data.publicUrl
  let r = await fetch(url, { headers: { range: 'bytes=2-5' } })
  assert.equal(r.status, 206)
  assert.equal(r.headers.get('content-range'), 'bytes 2-5/10')
  assert.equal(await r.text(), '2345')
  r = await fetch(url, { headers: { range: 'bytes=20-' } })
  assert.equal(r.status, 416)
  const { data } = await alice.from(id).download(path).asStream()
  const chunks = []
  for await (const c of data) chunks.push(Buffer.from(c))
  assert.equal(Buffer.concat(chunks).toString(), '0123456789')
})

// A path sent as is (fetch would resolve the dots itself).
function rawUpload(path, token) {
  return new Promise((resolve, reject) => {
    const u = new URL(URL_)
    const req = http.request(
      { host: u.hostname, port: u.port, method: 'POST', path: `${u.pathname}${path}`,
        headers: { authorization: `Bearer ${token}`, 'content-type': 'text/plain' } },
      (res) => {
        let body = ''
        res.on('data', (c) => (body += c))
        res.on('end', () => resolve({ status: res.statusCode, body: JSON.parse(body) }))
      },
    )
    req.on('error', reject)
    req.end('x')
  })
}

test('keys cannot climb out: dot segments, encoded or not, are refused; a leading slash is just a name', async () => {
  const id = bucket('paths')
  await service.createBucket(id)
  for (const path of [`/object/${id}/${ALICE}/../x.txt`, `/object/${id}/${ALICE}/%2e%2e/x.txt`,
    `/object/${id}/${ALICE}/%2E%2E%2Fx.txt`]) {
    const r = await rawUpload(path, process.env.ALICE_TOKEN)
    assert.equal(r.status, 400, path)
    assert.equal(r.body.statusCode, '400', path)
    assert.equal(r.body.error, 'InvalidKey', path)
  }
  const { data, error } = await alice.from(id).upload(`/${ALICE}/etc/passwd`, 'not the real one')
  assert.equal(error, null)
  assert.equal(data.path, `${ALICE}/etc/passwd`)
})

// A width×height RGB PNG: a gradient, so a resize has something to do.
const crc32 = (bytes) => {
  let c = ~0
  for (const b of bytes) {
    c ^= b
    for (let k = 0; k < 8; k++) c = c & 1 ? (c >>> 1) ^ 0xedb88320 : c >>> 1
  }
  return ~c >>> 0
}
const chunk = (type, data) => {
  const body = Buffer.concat([Buffer.from(type), data])
  const len = Buffer.alloc(4)
  len.writeUInt32BE(data.length)
  const crc = Buffer.alloc(4)
  crc.writeUInt32BE(crc32(body))
  return Buffer.concat([len, body, crc])
}
const makePng = (width, height) => {
  const ihdr = Buffer.alloc(13)
  ihdr.writeUInt32BE(width, 0)
  ihdr.writeUInt32BE(height, 4)
  ihdr.set([8, 2, 0, 0, 0], 8)
  const rows = Buffer.alloc((width * 3 + 1) * height)
  for (let y = 0; y < height; y++) {
    for (let x = 0; x < width; x++) rows.set([x % 256, y % 256, (x + y) % 256], y * (width * 3 + 1) + 1 + x * 3)
  }
  return Buffer.concat([
    Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]),
    chunk('IHDR', ihdr),
    chunk('IDAT', zlib.deflateSync(rows)),
    chunk('IEND', Buffer.alloc(0)),
  ])
}
// An image's format and size, read from its header (PNG, lossless WebP).
const imageSize = (buf) => {
  if (buf.subarray(1, 4).toString() === 'PNG') return ['png', buf.readUInt32BE(16), buf.readUInt32BE(20)]
  if (buf.subarray(8, 16).toString() === 'WEBPVP8L') {
    const bits = buf.readUInt32LE(21)
    return ['webp', (bits & 0x3fff) + 1, ((bits >> 14) & 0x3fff) + 1]
  }
  return ['unknown', 0, 0]
}

test('image transforms: sizes, resize modes, formats, public and signed URLs', async () => {
  const pub = bucket('images')
  const priv = bucket('photos')
  await service.createBucket(pub, { public: true })
  await service.createBucket(priv)
  const path = `${ALICE}/logo.png`
  await alice.from(pub).upload(path, makePng(400, 200), { contentType: 'image/png' })
  await alice.from(priv).upload(path, makePng(400, 200), { contentType: 'image/png' })
  const size = async (blob) => imageSize(Buffer.from(await blob.arrayBuffer()))

  // download({transform}) renders as the caller: cover fills the box, contain fits inside it,
  // fill stretches, one side keeps the aspect ratio, and nothing is enlarged.
  const render = async (transform) => {
    const { data, error } = await alice.from(priv).download(path, { transform })
    assert.equal(error, null)
    return size(data)
  }
  assert.deepEqual(await render({ width: 100, height: 100 }), ['png', 100, 100])
  assert.deepEqual(await render({ width: 100, height: 100, resize: 'contain' }), ['png', 100, 50])
  assert.deepEqual(await render({ width: 100, height: 100, resize: 'fill' }), ['png', 100, 100])
  assert.deepEqual(await render({ width: 80 }), ['png', 80, 40])
  assert.deepEqual(await render({ height: 3000 }), ['png', 400, 200])
  assert.deepEqual(await render({ width: 50, format: 'webp' }), ['webp', 50, 25])
  const { error: hidden } = await bob.from(priv).download(path, { transform: { width: 50 } })
  assert.equal(hidden.message, 'Object not found')

  // A public URL with a transform; a client that takes WebP gets it, and caches are told so.
  const url = alice.from(pub).getPublicUrl(path, { transform: { width: 120, height: 60, quality: 70 } }).data.publicUrl
  assert.ok(url.includes('/render/image/public/'))
  let r = await fetch(url)
  assert.equal(r.status, 200)
  assert.equal(r.headers.get('content-type'), 'image/png')
  assert.equal(r.headers.get('x-transformations'), 'height:60,width:120,resizing_type:fill,quality:70')
  assert.equal(r.headers.get('vary'), 'Accept')
  assert.deepEqual(imageSize(Buffer.from(await r.arrayBuffer())), ['png', 120, 60])
  const etag = r.headers.get('etag')
  r = await fetch(url, { headers: { 'if-none-match': etag } })
  assert.equal(r.status, 304)
  r = await fetch(url, { headers: { accept: 'image/webp,*/*' } })
  assert.equal(r.headers.get('content-type'), 'image/webp')
  assert.notEqual(r.headers.get('etag'), etag)
  assert.deepEqual(imageSize(Buffer.from(await r.arrayBuffer())), ['webp', 120, 60])

  // A signed URL carries its transform in its token: the query cannot change it.
  const { data: signed, error } = await alice.from(priv).createSignedUrl(path, 60, { transform: { width: 40, height: 40 } })
  assert.equal(error, null)
  assert.ok(signed.signedUrl.includes('/render/image/sign/'))
  r = await fetch(`${signed.signedUrl}&width=300`)
  assert.equal(r.status, 200)
  assert.ok(r.headers.get('expires'))
  assert.deepEqual(imageSize(Buffer.from(await r.arrayBuffer())), ['png', 40, 40])

  // A new version of the object is rendered anew, never answered from the cache.
  await alice.from(pub).upload(path, makePng(300, 300), { contentType: 'image/png', upsert: true })
  r = await fetch(url)
  assert.deepEqual(imageSize(Buffer.from(await r.arrayBuffer())), ['png', 120, 60])
  r = await fetch(alice.from(pub).getPublicUrl(path, { transform: { width: 1000, height: 1000 } }).data.publicUrl)
  assert.deepEqual(imageSize(Buffer.from(await r.arrayBuffer())), ['png', 300, 300])

  // What is no image is refused with Supabase's 422, never a 500.
  await alice.from(pub).upload(`${ALICE}/notes.png`, 'not an image at all', { contentType: 'image/png' })
  r = await fetch(alice.from(pub).getPublicUrl(`${ALICE}/notes.png`, { transform: { width: 10 } }).data.publicUrl)
  assert.equal(r.status, 422)
  assert.deepEqual(await r.json(), {
    statusCode: '422', code: 'InvalidImage', error: 'ImageProcessingError', message: 'Invalid source image',
  })
})

test('listV2: a flat listing and a folded one, paged by cursor, under row-level security', async () => {
  const id = bucket('listing')
  await service.createBucket(id)
  const names = ['a.txt', 'b/1.txt', 'b/2.txt', 'c.txt', 'd/x/y.txt'].map((n) => `${ALICE}/${n}`)
  for (const n of names) await alice.from(id).upload(n, 'x', { contentType: 'text/plain' })
  const api = alice.from(id)
  let { data, error } = await api.listV2({ prefix: `${ALICE}/`, limit: 2 })
  assert.equal(error, null)
  assert.deepEqual(data.objects.map((o) => o.name), names.slice(0, 2))
  assert.equal(data.objects[0].metadata.size, 1)
  assert.equal(data.hasNext, true)
  ;({ data } = await api.listV2({ prefix: `${ALICE}/`, limit: 2, cursor: data.nextCursor }))
  assert.deepEqual(data.objects.map((o) => o.name), names.slice(2, 4))
  ;({ data } = await api.listV2({ prefix: `${ALICE}/`, limit: 2, cursor: data.nextCursor }))
  assert.deepEqual([data.objects.map((o) => o.name), data.hasNext], [names.slice(4), false])

  ;({ data } = await api.listV2({ prefix: `${ALICE}/`, with_delimiter: true }))
  assert.deepEqual(data.folders.map((f) => f.name), [`${ALICE}/b/`, `${ALICE}/d/`])
  assert.deepEqual(data.objects.map((o) => o.name), [`${ALICE}/a.txt`, `${ALICE}/c.txt`])
  // Keys are the names' segments at the prefix's level, a folder's without its slash.
  assert.deepEqual(data.folders.map((f) => f.key), ['b', 'd'])
  assert.deepEqual(data.objects.map((o) => o.key), ['a.txt', 'c.txt'])
  // An empty cursor is the first page.
  ;({ data, error } = await api.listV2({ prefix: `${ALICE}/`, with_delimiter: true, cursor: '' }))
  assert.equal(error, null)
  assert.deepEqual(data.folders.map((f) => f.key), ['b', 'd'])
  ;({ data } = await api.listV2({ prefix: `${ALICE}/`, with_delimiter: true, limit: 2 }))
  assert.deepEqual([data.objects.map((o) => o.name), data.folders.map((f) => f.name), data.hasNext],
    [[`${ALICE}/a.txt`], [`${ALICE}/b/`], true])
  ;({ data } = await api.listV2({ prefix: `${ALICE}/`, with_delimiter: true, limit: 2, cursor: data.nextCursor }))
  assert.deepEqual([data.objects.map((o) => o.name), data.folders.map((f) => f.name), data.hasNext],
    [[`${ALICE}/c.txt`], [`${ALICE}/d/`], false])

  ;({ data } = await api.listV2({ prefix: `${ALICE}/`, sortBy: { column: 'created_at', order: 'desc' }, limit: 3 }))
  assert.deepEqual(data.objects.map((o) => o.name), names.slice(2).reverse())
  ;({ data } = await api.listV2({ prefix: `${ALICE}/`, limit: 3, cursor: data.nextCursor }))
  assert.deepEqual(data.objects.map((o) => o.name), names.slice(0, 2).reverse())

  ;({ data } = await bob.from(id).listV2({ prefix: `${ALICE}/` }))
  assert.deepEqual([data.objects, data.folders, data.hasNext], [[], [], false])
  ;({ error } = await api.listV2({ cursor: 'not a cursor!' }))
  assert.equal(error.statusCode, '400')
})
