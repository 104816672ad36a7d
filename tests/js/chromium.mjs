// Debian's chromium, headless, as the page tests drive it (puppeteer-core; CHROMIUM names
// another binary).
import puppeteer from 'puppeteer-core'

export function launchChromium() {
  return puppeteer.launch({
    executablePath: process.env.CHROMIUM ?? '/usr/bin/chromium',
    headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage'],
  })
}
