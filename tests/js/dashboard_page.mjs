// The dashboard in a browser, as a first-time user meets it: the setup link rowgate printed →
// the first administrator → a table → rows → a rule (SQLite) or the policies (PostgreSQL) → a
// user → an image uploaded and its thumbnail → a change arriving in the realtime inspector.
// ROWGATE_URL and SETUP_LINK say where; SHOTS is the folder the screenshots go to; BACKEND is
// sqlite or postgresql. Prints what it saw as JSON.
import { mkdirSync, writeFileSync } from 'node:fs'
import { deflateSync } from 'node:zlib'
import { launchChromium } from './chromium.mjs'

const base = process.env.ROWGATE_URL
const backend = process.env.BACKEND
const shots = process.env.SHOTS
mkdirSync(shots, { recursive: true })
const seen = {}
let shot = 0

const browser = await launchChromium()
try {
  const page = await browser.newPage()
  await page.setViewport({ width: 1280, height: 800 })
  const errors = []
  page.on('pageerror', (e) => errors.push(String(e)))
  const snap = async (name) => page.screenshot({ path: `${shots}/${backend}-${String(++shot).padStart(2, '0')}-${name}.png` })
  const text = async (selector) => page.$eval(selector, (e) => e.textContent)
  // Polled on a timer: a tab in the background gets no animation frames to poll on.
  const waitText = (selector, needle) =>
    page.waitForFunction((s, n) => [...document.querySelectorAll(s)].some((e) => e.textContent.includes(n)), { timeout: 30000, polling: 100 }, selector, needle)

  // The setup link: the first administrator.
  await page.goto(process.env.SETUP_LINK)
  await page.waitForSelector('input[name=email]')
  await snap('setup')
  await page.type('input[name=email]', 'ada@example.com')
  await page.type('input[name=password]', 'a long enough secret')
  await page.click('button[type=submit]')
  await page.waitForSelector('nav .brand')
  seen.admin = await text('nav .who')

  // A table, made in the editor (a fresh database shows the form at once).
  await page.waitForSelector('input[name=table]')
  await page.type('input[name=table]', 'notes')
  // The form's column rows come with it, but a busy host may draw them a moment later.
  await page.waitForFunction(() => document.querySelectorAll('input[name=column]').length >= 2, { timeout: 30000, polling: 100 })
  const columns = await page.$$('input[name=column]')
  await columns[1].type('title')
  await snap('new-table')
  await page.click('form.card button[type=submit]')
  await waitText('.toolbar h2', 'notes')

  // Rows, added through the form.
  for (const title of ['milk', 'eggs']) {
    await page.evaluate(() => [...document.querySelectorAll('button')].find((b) => b.textContent === 'Add row').click())
    await page.waitForSelector('input[name=title]')
    await page.type('input[name=title]', title)
    await page.click('form.card button[type=submit]')
    await waitText('table.rows td', title)
  }
  seen.rows = await page.$$eval('table.rows tbody tr', (rows) => rows.map((r) => r.children[1].textContent))
  await snap('rows')

  // Who may read: a rule on SQLite; the policies on PostgreSQL.
  await page.goto(`${base}/_/#/rules`)
  if (backend === 'sqlite') {
    await page.waitForSelector('textarea[name=rules]')
    await page.$eval('textarea[name=rules]', (t) => { t.value = '[notes]\nselect = { everyone = "true" }\n' })
    await page.click('form.card button[type=submit]')
    await waitText('.notice', 'Saved')
  } else {
    await page.goto(`${base}/_/#/sql`)
    await page.waitForSelector('textarea[name=query]')
    await page.type(
      'textarea[name=query]',
      'ALTER TABLE notes ENABLE ROW LEVEL SECURITY; CREATE POLICY readable ON notes FOR SELECT TO anon USING (true); ALTER PUBLICATION supabase_realtime ADD TABLE notes',
    )
    await page.click('form.card button[type=submit]')
    await waitText('p.muted', 'changed')
    await page.goto(`${base}/_/#/rules`)
    await waitText('.card h3', 'notes')
    seen.policies = await page.$$eval('table.rows td', (cells) => cells.map((c) => c.textContent))
  }
  await snap('access')
  seen.visitor = await (await fetch(`${base}/rest/v1/notes?select=title&order=title`)).json()

  // A user.
  await page.goto(`${base}/_/#/users`)
  await page.waitForSelector('input[name=new-email]')
  await page.type('input[name=new-email]', 'grace@example.com')
  await page.type('input[name=new-password]', 'secret123')
  await page.click('form.toolbar button[type=submit]')
  await waitText('table.rows td', 'grace@example.com')
  // Grace signs in, as the application would have her: her session is listed, then ended.
  const signIn = await fetch(`${base}/auth/v1/token?grant_type=password`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ email: 'grace@example.com', password: 'secret123' }),
  })
  const { refresh_token: refresh } = await signIn.json()
  const clickIn = (rowText, label) =>
    page.evaluate((r, l) => {
      const row = [...document.querySelectorAll('tr')].find((tr) => tr.textContent.includes(r))
      ;[...row.querySelectorAll('button')].find((b) => b.textContent === l).click()
    }, rowText, label)
  await clickIn('grace@example.com', 'Sessions')
  await waitText('#sessions td', 'password')
  await snap('users')
  await page.evaluate(() => [...document.querySelectorAll('#sessions button')].find((b) => b.textContent === 'Sign out everywhere').click())
  await waitText('#sessions', 'No session')
  const refreshed = await fetch(`${base}/auth/v1/token?grant_type=refresh_token`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ refresh_token: refresh }),
  })
  seen.signedOut = [signIn.status, refreshed.status]

  // A bucket, an image uploaded, its thumbnail made by the server.
  await page.goto(`${base}/_/#/storage`)
  await page.waitForSelector('input[name=bucket]')
  await page.type('input[name=bucket]', 'pictures')
  await page.click('form.toolbar button[type=submit]')
  await page.waitForSelector('input[type=file]')
  const image = `${shots}/upload.png`
  writeFileSync(image, png(96, 64))
  const input = await page.$('input[type=file]')
  await input.uploadFile(image)
  await page.waitForSelector('figure img', { timeout: 30000 })
  await page.waitForFunction(() => document.querySelector('figure img').naturalWidth > 0, { timeout: 30000 })
  seen.thumbnail = await page.$eval('figure img', (img) => [img.naturalWidth, img.naturalHeight])
  await snap('storage')

  // The realtime inspector, and a row added in another tab arriving there.
  await page.goto(`${base}/_/#/realtime`)
  await waitText('#realtime-status', 'listening')
  await waitText('#channels td', 'realtime:rowgate-dashboard')
  seen.channel = await page.$eval('#channels tbody tr', (tr) => [...tr.children].map((td) => td.textContent))
  const other = await browser.newPage()
  await other.goto(`${base}/_/#/tables/notes`)
  await other.waitForFunction(() => [...document.querySelectorAll('button')].some((b) => b.textContent === 'Add row'), { timeout: 30000 })
  await other.evaluate(() => [...document.querySelectorAll('button')].find((b) => b.textContent === 'Add row').click())
  await other.waitForSelector('input[name=title]')
  await other.type('input[name=title]', 'bread')
  await other.click('form.card button[type=submit]')
  await page.bringToFront()
  await waitText('#changes li', 'bread')
  seen.change = await text('#changes li')
  await snap('realtime')
  await other.close()

  // An API key, shown once.
  await page.goto(`${base}/_/#/keys`)
  await page.waitForSelector('input[name=key-role]')
  await page.type('input[name=key-role]', 'anon')
  await page.type('input[name=key-name]', 'website')
  await page.click('form.toolbar button[type=submit]')
  await page.waitForSelector('#new-key')
  seen.key = (await text('#new-key')).slice(0, 3)
  await waitText('table.rows td', 'website')
  await snap('keys')

  // Activity: the latest requests and the metrics, drawn.
  await page.goto(`${base}/_/#/activity`)
  await page.waitForSelector('svg.chart polyline', { timeout: 30000 })
  await fetch(`${base}/rest/v1/notes?select=title`)
  await waitText('table.rows td', '/rest/v1/notes?select=title')
  await snap('activity')

  // A backup taken now, listed, and downloaded.
  if (backend === 'sqlite') {
    await page.goto(`${base}/_/#/settings`)
    await page.waitForSelector('#backup')
    await page.click('#backup')
    await waitText('.notice', 'taken')
    await page.click('#backups button')
    await waitText('.notice', 'was downloaded')
    seen.backup = true
    await snap('settings')
  }
  seen.errors = errors
  console.log(JSON.stringify(seen))
} finally {
  await browser.close()
}

// A small red PNG: chunks with their CRCs, made here so no fixture is needed.
function png(width, height) {
  const crcTable = Array.from({ length: 256 }, (_, n) => {
    let c = n
    for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1
    return c >>> 0
  })
  const crc = (bytes) => {
    let c = 0xffffffff
    for (const b of bytes) c = crcTable[(c ^ b) & 0xff] ^ (c >>> 8)
    return (c ^ 0xffffffff) >>> 0
  }
  const chunk = (type, data) => {
    const out = Buffer.alloc(12 + data.length)
    out.writeUInt32BE(data.length, 0)
    out.write(type, 4, 'ascii')
    data.copy(out, 8)
    out.writeUInt32BE(crc(out.subarray(4, 8 + data.length)), 8 + data.length)
    return out
  }
  const header = Buffer.alloc(13)
  header.writeUInt32BE(width, 0)
  header.writeUInt32BE(height, 4)
  header[8] = 8
  header[9] = 2
  const raw = Buffer.alloc((width * 3 + 1) * height)
  for (let y = 0; y < height; y++) for (let x = 0; x < width; x++) raw[y * (width * 3 + 1) + 1 + x * 3] = 255
  return Buffer.concat([Buffer.from([137, 80, 78, 71, 13, 10, 26, 10]), chunk('IHDR', header), chunk('IDAT', deflateSync(raw)), chunk('IEND', Buffer.alloc(0))])
}
