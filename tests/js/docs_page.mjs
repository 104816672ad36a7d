// The API reference page in a real browser (Debian's chromium, driven by puppeteer-core):
// opens ROWGATE_URL/rowgate/docs/, lists the operations' tags, tries GET /<TABLE> from the
// page and prints what it saw as one JSON line: {tags, status, body}.
import { launchChromium } from './chromium.mjs'

const base = process.env.ROWGATE_URL
const table = process.env.TABLE
const browser = await launchChromium()
try {
  const page = await browser.newPage()
  await page.goto(`${base}/rowgate/docs/`, { waitUntil: 'networkidle0', timeout: 60000 })
  await page.waitForSelector('.opblock-tag', { timeout: 30000 })
  const tags = await page.$$eval('.opblock-tag', (els) => els.map((e) => e.getAttribute('data-tag')))
  const op = `#operations-${table}-get_${table}`
  await page.click(`${op} .opblock-summary-control`)
  await page.waitForSelector(`${op} .try-out__btn`, { timeout: 10000 })
  await page.click(`${op} .try-out__btn`)
  await page.waitForSelector(`${op} .execute`, { timeout: 10000 })
  await page.click(`${op} .execute`)
  const answer = `${op} .live-responses-table tbody .response`
  await page.waitForSelector(`${answer} .response-col_status`, { timeout: 20000 })
  const status = await page.$eval(`${answer} .response-col_status`, (e) => e.textContent.trim())
  const body = await page.$eval(`${answer} .response-col_description .microlight`, (e) => e.textContent)
  console.log(JSON.stringify({ tags, status, body }))
} finally {
  await browser.close()
}
