# Licensed under the Apache License, Version 2.0 (the "License"); you may
# not use this file except in compliance with the License. You may obtain
# a copy of the License at
#
#      http://www.apache.org/licenses/LICENSE-2.0
#
# Unless required by applicable law or agreed to in writing, software
# distributed under the License is distributed on an "AS IS" BASIS, WITHOUT
# WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied. See the
# License for the specific language governing permissions and limitations
# under the License.

"""A tenant at Horizon, in a real browser: Debian's headless Chromium
driven by Selenium through Debian's chromedriver (never a downloaded
driver: SE_OFFLINE).

``launch`` does what a person does: log in, Project -> Compute ->
Instances -> Launch Instance, a name, the image under Source, the flavor
under Flavor (the one shared network is already allocated), Launch
Instance; then waits until the instance's row says Active.  Screenshots
of each step go to ``shots_dir``.

``container_run`` opens Project -> Compute -> Container runs (the
project's Horizon plugin, dashboard/) and a run's page, and reads back
what the page shows: the summary, the charts, the output.
"""

import os
import time

from selenium.common import exceptions as se_exc
from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions as EC
from selenium.webdriver.support.ui import WebDriverWait

from bmc_lab import procs

CHROMIUM = '/usr/bin/chromium'
CHROMEDRIVER = '/usr/bin/chromedriver'
_MODAL = "//div[contains(@class,'modal')]"


class Browser:
    def __init__(self, base_url, shots_dir, timeout=60):
        for path, package in ((CHROMIUM, 'chromium'),
                              (CHROMEDRIVER, 'chromium-driver')):
            if not os.access(path, os.X_OK):
                raise procs.LabError('%s is missing: install the Debian '
                                     'package %s (tools/host-setup.sh does)'
                                     % (path, package))
        os.environ['SE_OFFLINE'] = 'true'   # Selenium Manager: no downloads
        opts = webdriver.ChromeOptions()
        opts.binary_location = CHROMIUM
        for arg in ('--headless=new', '--no-sandbox', '--disable-gpu',
                    '--window-size=1400,1000', '--no-proxy-server'):
            opts.add_argument(arg)
        self.driver = webdriver.Chrome(service=Service(CHROMEDRIVER),
                                       options=opts)
        self.base_url = base_url.rstrip('/')
        self.shots_dir = shots_dir
        self.shots = []
        self.wait = WebDriverWait(self.driver, timeout)
        os.makedirs(shots_dir, exist_ok=True)

    def close(self):
        self.driver.quit()

    def shot(self, name, filename=None, full_page=False):
        """A screenshot, ``NN-name.png`` in ``shots_dir`` (``filename``
        instead when given); ``full_page``: the whole page, not only the
        window's height."""
        path = os.path.join(self.shots_dir, filename or '%02d-%s.png'
                            % (len(self.shots) + 1, name))
        d = self.driver
        size = d.get_window_size()
        if full_page:
            height = d.execute_script(
                'return Math.max(document.body.scrollHeight, '
                'document.documentElement.scrollHeight)')
            d.set_window_size(size['width'], max(size['height'], height))
        try:
            d.save_screenshot(path)
        finally:
            if full_page:
                d.set_window_size(size['width'], size['height'])
        self.shots.append(path)
        return path

    def login(self, username, password):
        d = self.driver
        d.get(self.base_url + '/auth/login/')
        d.find_element(By.ID, 'id_username').send_keys(username)
        d.find_element(By.ID, 'id_password').send_keys(password)
        d.find_element(By.ID, 'loginBtn').click()
        try:
            self.wait.until(EC.url_contains('/project'))
        except se_exc.TimeoutException:
            self.shot('login-failed')
            raise procs.LabError('Horizon login as %s failed; see %s'
                                 % (username, self.shots[-1]))

    def _step(self, label):
        self.driver.find_element(
            By.XPATH, "%s//ul//a[normalize-space()='%s']"
            % (_MODAL, label)).click()
        time.sleep(1)

    def _allocate(self, text):
        """Click the allocate (arrow-up) button of the visible row that
        shows ``text`` in the current wizard step."""
        rows = [r for r in self.driver.find_elements(
            By.XPATH, "%s//tr[.//td[normalize-space()='%s']]"
            % (_MODAL, text)) if r.is_displayed()]
        if not rows:
            self.shot('not-offered-' + text)
            raise procs.LabError('Horizon does not offer %r in the launch '
                                 'wizard; see %s' % (text, self.shots[-1]))
        rows[0].find_element(By.CSS_SELECTOR, 'button.fa-arrow-up').click()
        time.sleep(1)

    def launch(self, name, image, flavor):
        """The Launch Instance wizard; returns when it has closed."""
        d = self.driver
        d.get(self.base_url + '/project/instances/')
        self.wait.until(EC.element_to_be_clickable(
            (By.CSS_SELECTOR, '#instances__action_launch-ng'))).click()
        self.wait.until(EC.visibility_of_element_located(
            (By.CSS_SELECTOR, '.modal input#name'))).send_keys(name)
        self.shot('launch-details')
        self._step('Source')
        self._allocate(image)
        self.shot('launch-source')
        self._step('Flavor')
        self._allocate(flavor)
        self.shot('launch-flavor')
        self._step('Networks')
        self.shot('launch-networks')
        d.find_element(By.XPATH, "%s//button[normalize-space()='Launch "
                                 "Instance']" % _MODAL).click()
        try:
            self.wait.until(EC.invisibility_of_element_located(
                (By.CSS_SELECTOR, '.modal-dialog')))
        except se_exc.TimeoutException:
            self.shot('launch-not-accepted')
            raise procs.LabError('the Launch Instance wizard did not close; '
                                 'see %s' % self.shots[-1])

    def instance_status(self, name):
        """The Status column of instance ``name`` in Project ->
        Instances, or None while it is not listed."""
        d = self.driver
        d.get(self.base_url + '/project/instances/')
        rows = d.find_elements(
            By.XPATH, "//table[@id='instances']//tr[.//a[normalize-space()="
                      "'%s']]" % name)
        if not rows:
            return None
        cell = rows[0].find_elements(By.CSS_SELECTOR, "td.status_up, "
                                     "td.status_down, td.status_unknown")
        return cell[0].text.strip() if cell else None

    def wait_status(self, name, status, timeout=900, poll=10):
        deadline = time.monotonic() + timeout
        seen = None
        while time.monotonic() < deadline:
            seen = self.instance_status(name)
            if seen == status:
                return seen
            if seen == 'Error':
                break
            time.sleep(poll)
        self.shot('instance-%s' % (seen or 'missing').lower())
        raise procs.LabError('instance %s is %s in Horizon, not %s; see %s'
                             % (name, seen, status, self.shots[-1]))

    def container_runs(self, shot=None):
        """Project -> Compute -> Container runs, from the sidebar; returns
        the rows' deploy ids, newest first.  ``shot``: a screenshot of the
        list under that file name."""
        d = self.driver
        d.get(self.base_url + '/project/')
        link = (By.XPATH, "//nav[@id='sidebar']//a[normalize-space()="
                          "'Container runs']")
        try:
            self.wait.until(EC.element_to_be_clickable(link)).click()
            self.wait.until(EC.presence_of_element_located(
                (By.CSS_SELECTOR, 'table#container_runs')))
        except se_exc.TimeoutException:
            self.shot('no-container-runs-panel')
            raise procs.LabError('Horizon shows no Project -> Compute -> '
                                 'Container runs panel; see %s'
                                 % self.shots[-1])
        if shot:
            self.shot('runs-index', filename=shot)
        return [r.get_attribute('data-object-id') for r in d.find_elements(
            By.CSS_SELECTOR, 'table#container_runs tbody tr[data-object-id]')]

    def container_run(self, deploy_id, index_shot=None, detail_shot=None):
        """The Container runs list, then the page of run ``deploy_id``
        (its row's link); returns what that page shows: ``state``,
        ``summary`` ({label: value}), ``charts`` (the inline SVG charts'
        kinds), ``unavailable`` (the charts' messages instead), ``output``,
        ``results`` (paths offered for download), ``html``.  The
        screenshots: the list and the whole run page, under those file
        names."""
        d = self.driver
        found = self.container_runs(shot=index_shot)
        if deploy_id not in found:
            self.shot('run-not-listed')
            raise procs.LabError('run %s is not in Horizon\'s Container '
                                 'runs (%s); see %s' % (deploy_id, found,
                                                        self.shots[-1]))
        d.find_element(By.CSS_SELECTOR, "tr[data-object-id='%s'] td a"
                       % deploy_id).click()
        try:
            page = self.wait.until(EC.presence_of_element_located(
                (By.CSS_SELECTOR, "div.bmc-run[data-deploy-id='%s']"
                                  % deploy_id)))
        except se_exc.TimeoutException:
            self.shot('run-page-missing')
            raise procs.LabError('the page of run %s did not open; see %s'
                                 % (deploy_id, self.shots[-1]))
        summary = {}
        for dt in page.find_elements(By.CSS_SELECTOR, 'dl.bmc-summary dt'):
            dd = dt.find_element(By.XPATH, 'following-sibling::dd[1]')
            summary[dt.get_attribute('textContent').strip()] = (
                dd.get_attribute('textContent').strip())
        seen = {
            'state': page.get_attribute('data-state'),
            'summary': summary,
            'charts': [c.get_attribute('id')[len('bmc-chart-'):]
                       for c in page.find_elements(
                           By.CSS_SELECTOR, '.bmc-chart-box')
                       if c.find_elements(By.CSS_SELECTOR, 'svg')],
            'unavailable': [p.text for p in page.find_elements(
                By.CSS_SELECTOR, '.bmc-chart-unavailable')],
            'output': '\n'.join(p.get_attribute('textContent') for p in
                                page.find_elements(By.CSS_SELECTOR,
                                                   'pre.bmc-output')),
            'results': [a.text.strip() for a in page.find_elements(
                By.CSS_SELECTOR, 'a.bmc-result-download')],
            'html': d.page_source,
        }
        if detail_shot:
            self.shot('run-detail', filename=detail_shot, full_page=True)
        return seen
