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

"""The container deploy interface, on Ironic's own DB test fixtures."""

import base64
import contextlib
import gzip
import inspect
import os
import threading
import time
import types
from unittest import mock

import fixtures
from oslo_utils import strutils
from oslo_utils import uuidutils

from ironic.common import exception
from ironic.common import states
from ironic.conductor import task_manager
from ironic.conf import CONF
from ironic import objects
from ironic.drivers.modules import agent_base
from ironic.tests.unit.db import base as db_base
from ironic.tests.unit.objects import utils as obj_utils

from ironic_bmc import deploy_record
from ironic_bmc.drivers import agent_calls
from ironic_bmc.drivers import boot_files
from ironic_bmc.drivers import container_deploy
from ironic_bmc.drivers import rootfs
from ironic_bmc.drivers import rootfs_build
from ironic_bmc.drivers import run_close
from ironic_bmc.drivers import tuning
from ironic_bmc.drivers import workload_watch
from ironic_bmc.image import cache as artifact_cache
from ironic_bmc.image import exceptions as image_exc
from ironic_bmc.image import pipeline
from ironic_bmc.image import reference
from ironic_bmc.image import registry
from ironic_bmc import deploy_info
from ironic_bmc import report as run_report
from ironic_bmc import run_files

IMAGE = '127.0.0.1:5050/bmc/demo:1'


def resolved(manifest_digest='sha256:b'):
    """What :func:`rootfs.resolve` returns, for a mock of it: the real
    resolved image (a field the deploy misreads fails, as it would for
    real) and a client specced on the registry's."""
    image = pipeline.ResolvedImage(
        ref=reference.parse(IMAGE), manifest_digest=manifest_digest,
        manifest={}, index_digest=None, architecture='amd64', layers_size=0)
    client = mock.create_autospec(registry.RegistryClient, instance=True)
    return image, client


class ContainerDeployTestCase(db_base.DbTestCase):

    def _clear_attrs(self):
        # Ironic's base deletes the test's attributes at cleanup, which
        # pytest's unittest runner then trips over.
        pass

    def setUp(self):
        super().setUp()
        # The first check after a deploy is a thread that polls the node
        # for up to a minute: left running, it outlives the test and
        # shares the next test's in-memory database (a CI flake: "no such
        # table: nodes").  Tests that look at it patch it themselves.
        self.arm_soon = self.useFixture(fixtures.MockPatchObject(
            workload_watch, 'arm_soon', autospec=True)).mock
        self.config(enabled_deploy_interfaces=['container', 'fake'])
        self.config(enabled_boot_interfaces=['ipxe', 'fake'])
        self.config(enabled_vendor_interfaces=['container', 'fake'])
        self.config_temp_dir('http_root', group='deploy')
        self.config(http_url='http://10.0.2.100:8080', group='deploy')
        self.config(endpoint_override='http://10.0.2.100:6385',
                    group='service_catalog')
        self.config_temp_dir('report_dir', group='container')
        self.config_temp_dir('image_cache_dir', group='container')
        # The tests' registries are on loopback: listed, as an operator
        # lists the registries of its own network; and Docker Hub (listed:
        # not resolved), which some tests name.
        self.config(allowed_registries=['127.0.0.1', 'docker.io'],
                    group='container')
        # Ironic's LocalPublisher runs restorecon after linking an artifact
        # into the HTTP root; this host has no SELinux (its tests forbid
        # running commands).
        self.restorecon = self.useFixture(fixtures.MockPatch(
            'ironic.common.image_publisher.utils.execute',
            side_effect=FileNotFoundError('/usr/sbin/restorecon'))).mock
        self.node = obj_utils.create_test_node(
            self.context, driver='fake-hardware',
            deploy_interface='container', boot_interface='ipxe',
            vendor_interface='container', network_interface='noop',
            provision_state=states.DEPLOYING,
            target_provision_state=states.ACTIVE,
            properties={'memory_mb': 2048, 'cpu_arch': 'x86_64'},
            instance_info={'container_image': IMAGE,
                           'container_mode': 'job'},
            driver_info={'deploy_kernel': 'http://h/k',
                         'deploy_ramdisk': 'http://h/r'})
        self.artifact = pipeline.RootfsArtifact(
            path=self._artifact_file(), digest='sha256:' + 'a' * 64,
            format='erofs', compression=None, size=4096,
            unpacked_size=8192, manifest_digest='sha256:' + 'b' * 64,
            image=IMAGE, architecture='amd64',
            config=pipeline.ImageConfig(cmd=['/demo.sh'],
                                        env=['PATH=/bin']),
            cache_key='k', built=True, build_seconds=0.1)

    def _artifact_file(self):
        path = os.path.join(self.useFixture(
            __import__('fixtures').TempDir()).path, 'rootfs.erofs')
        with open(path, 'wb') as f:
            f.write(b'erofs image')
        return path


class CapturingExecutor:
    """Holds the builds deploy() hands to the worker pool; the test runs
    them once it has released the node's lock, as a worker would."""

    def __init__(self):
        self.submitted = []

    @classmethod
    def install(cls, test):
        """The rootfs builds of ``test`` go to a new one; returned."""
        executor = cls()
        test.useFixture(fixtures.MockPatchObject(
            rootfs_build, '_get_executor', return_value=executor))
        test.useFixture(fixtures.MockPatchObject(
            rootfs_build, '_in_progress', set()))
        return executor

    def submit(self, fn, *args, **kwargs):
        self.submitted.append((fn, args, kwargs))
        return mock.Mock()

    def run_all(self):
        while self.submitted:
            fn, args, kwargs = self.submitted.pop(0)
            fn(*args, **kwargs)


@mock.patch.object(container_deploy.manager_utils, 'node_power_action',
                   autospec=True)
@mock.patch.object(boot_files, 'prepare', autospec=True)
@mock.patch.object(rootfs, 'prepare', autospec=True)
@mock.patch.object(rootfs, 'resolve', autospec=True)
class DeployStepTestCase(ContainerDeployTestCase):

    def setUp(self):
        super().setUp()
        self.executor = CapturingExecutor.install(self)

    def _deploy(self, mock_resolve):
        mock_resolve.return_value = resolved()
        with task_manager.acquire(self.context, self.node.uuid) as task:
            result = task.driver.deploy.deploy(task)
            # Ironic saves the node as the step returns (waiting, or
            # after the next step).
            task.node.save()
        return result

    def test_deploy_powers_on_and_builds_outside_the_lock(
            self, mock_resolve, mock_prepare, mock_boot, mock_power):
        mock_prepare.return_value = self.artifact
        self.assertEqual(states.DEPLOYWAIT, self._deploy(mock_resolve))
        # The step returned with the node on and the build handed to a
        # worker: nothing built under the node's lock.
        mock_prepare.assert_not_called()
        self.assertEqual(1, len(self.executor.submitted))
        mock_power.assert_called_once_with(mock.ANY, states.POWER_ON)
        node = objects.Node.get_by_uuid(self.context, self.node.uuid)
        info = node.driver_internal_info['bmc_deploy']
        self.assertEqual('building', info['build']['state'])
        self.assertNotIn('artifact_token_url', info)
        self.assertEqual(run_report.get(node)['deploy_id'],
                         info['deploy_id'])

        self.executor.run_all()
        # The image is resolved once; the build gets that resolution.
        mock_resolve.assert_called_once_with(mock.ANY, mock.ANY)
        self.assertIs(mock_resolve.return_value,
                      mock_prepare.call_args[0][2])
        node = objects.Node.get_by_uuid(self.context, self.node.uuid)
        info = node.driver_internal_info['bmc_deploy']
        self.assertEqual('ready', info['build']['state'])
        args = dict(info['stage_args'], url=info['artifact_token_url'])
        self.assertEqual('sha256:' + 'a' * 64, args['digest'])
        self.assertEqual('erofs', args['format'])
        self.assertEqual('ramfs', args['rootfs'])
        # Published at an unguessable path under the node's directory.
        prefix = 'http://10.0.2.100:8080/%s/rootfs-' % self.node.uuid
        self.assertTrue(args['url'].startswith(prefix), args['url'])
        rel = args['url'][len('http://10.0.2.100:8080/'):]
        from ironic.conf import CONF
        self.assertTrue(os.path.exists(
            os.path.join(CONF.deploy.http_root, rel)))
        self.assertEqual(['/demo.sh'], info['workload_args']['command'])
        self.assertEqual('job', info['workload_args']['mode'])
        report = run_report.get(node)
        names = [s['name'] for s in report['stages']]
        self.assertEqual(['artifact-ready', 'power-on'], names)
        self.assertEqual('sha256:b', report['image_digest'])
        self.assertEqual('http://h/k', report['kernel'])
        self.assertEqual(self.artifact.digest, report['artifact']['digest'])
        # What Ironic's API shows whoever may not see driver secrets (the
        # node's owner): no trace of the artifact's URL.
        shown = strutils.mask_dict_password(node.driver_internal_info,
                                            '******')
        self.assertNotIn(rel.split('/')[1], str(shown))

    def test_unknown_image_fails_before_anything(self, mock_resolve,
                                                 mock_prepare, mock_boot,
                                                 mock_power):
        mock_resolve.side_effect = image_exc.ImageNotFound(
            ref=IMAGE, what='tag 1')
        with task_manager.acquire(self.context, self.node.uuid) as task:
            exc = self.assertRaises(exception.InstanceDeployFailure,
                                    task.driver.deploy.deploy, task)
        self.assertIn(IMAGE, str(exc))
        mock_boot.assert_not_called()
        mock_power.assert_not_called()
        mock_prepare.assert_not_called()
        self.assertEqual([], self.executor.submitted)

    @mock.patch.object(container_deploy.energy, 'stop', autospec=True)
    def test_bad_layer_fails_the_deploy_and_powers_off(
            self, mock_energy_stop, mock_resolve, mock_prepare, mock_boot,
            mock_power):
        mock_prepare.side_effect = image_exc.UnsafeLayer(
            layer='sha256:c', path='../etc/passwd',
            reason='path escapes the root')
        node = self._failed_build(mock_resolve, mock_power)
        self.assertIn('../etc/passwd', node.last_error)
        self.assertIn(IMAGE, node.last_error)
        self.assertEqual([mock.call(mock.ANY, states.POWER_ON),
                          mock.call(mock.ANY, states.POWER_OFF)],
                         mock_power.call_args_list)
        report = run_report.load(node.uuid,
                                 run_report.get(node)['deploy_id'])
        self.assertEqual('failed', report['state'])
        self.assertIn('../etc/passwd', report['error'])

    def _failed_build(self, mock_resolve, mock_power):
        """Deploy, run the build: the deploy failed, nothing of it kept."""
        self._deploy(mock_resolve)
        self.node.refresh()
        self.node.provision_state = states.DEPLOYWAIT
        self.node.save()
        mock_power.side_effect = self._set_power
        self.executor.run_all()
        node = objects.Node.get_by_uuid(self.context, self.node.uuid)
        self.assertEqual(states.DEPLOYFAIL, node.provision_state)
        self.assertNotIn('bmc_deploy', node.driver_internal_info)
        return node

    @mock.patch.object(container_deploy.energy, 'stop', autospec=True)
    def test_image_env_too_large_fails_the_deploy(
            self, mock_energy_stop, mock_resolve, mock_prepare, mock_boot,
            mock_power):
        """A tenant's image with a 120 KB Env: the deploy fails naming
        it, instead of a record the database cannot hold."""
        self.artifact.config = pipeline.ImageConfig(
            cmd=['/demo.sh'], env=['BIG=' + 'x' * 120000])
        mock_prepare.return_value = self.artifact
        node = self._failed_build(mock_resolve, mock_power)
        self.assertIn('The command and environment of image %s' % IMAGE,
                      node.last_error)
        self.assertIn('at most 16384 are accepted', node.last_error)

    @mock.patch.object(container_deploy.energy, 'stop', autospec=True)
    def test_record_past_the_column_fails_the_deploy(
            self, mock_energy_stop, mock_resolve, mock_prepare, mock_boot,
            mock_power):
        mock_prepare.return_value = self.artifact
        with mock.patch.object(rootfs_build, 'INTERNAL_INFO_MAX', 1024):
            node = self._failed_build(mock_resolve, mock_power)
        self.assertIn("the run's record would take", node.last_error)
        self.assertIn('more than 1024', node.last_error)

    @mock.patch.object(container_deploy.energy, 'stop', autospec=True)
    def test_record_the_database_refuses_fails_the_deploy(
            self, mock_energy_stop, mock_resolve, mock_prepare, mock_boot,
            mock_power):
        """The build's record raising (the database refusing it) fails
        the deploy; it does not stay building, rebuilt every 10 s."""
        mock_prepare.return_value = self.artifact
        with mock.patch.object(
                rootfs_build.boot_files, 'publish_artifact', autospec=True,
                side_effect=exception.IronicException(
                    '(1406, "Data too long for column driver_internal_info")')
        ) as mock_publish:
            node = self._failed_build(mock_resolve, mock_power)
        self.assertTrue(mock_publish.called)
        self.assertIn("the build's result could not be recorded: (1406, "
                      '"Data too long', node.last_error)
        self.assertFalse(rootfs_build.orphaned(node))

    def _set_power(self, task, state):
        task.node.power_state = state
        task.node.save()

    @mock.patch.object(container_deploy.manager_utils,
                       'notify_conductor_resume_deploy', autospec=True)
    @mock.patch.object(agent_base, 'execute_step', autospec=True)
    def test_stage_step_waits_for_the_build_then_resumes(
            self, mock_execute, mock_resume, mock_resolve, mock_prepare,
            mock_boot, mock_power):
        mock_prepare.return_value = self.artifact
        self._deploy(mock_resolve)
        self.node.refresh()
        self.node.provision_state = states.DEPLOYWAIT
        self.node.deploy_step = {'interface': 'deploy',
                                 'step': 'bmc_stage_rootfs', 'priority': 80,
                                 'args': {}}
        self.node.save()
        # The agent is up before the build is done.
        with task_manager.acquire(self.context, self.node.uuid) as task:
            self.assertEqual(states.DEPLOYWAIT,
                             task.driver.deploy.bmc_stage_rootfs(task))
            mock_execute.assert_not_called()
            dii = task.node.driver_internal_info
            # Ironic runs this step again, and heartbeats do not move the
            # deploy on meanwhile.
            self.assertIs(False, dii['skip_current_deploy_step'])
            self.assertIs(True, dii['deployment_polling'])
        mock_resume.assert_not_called()
        self.executor.run_all()
        mock_resume.assert_called_once_with(mock.ANY)
        mock_execute.return_value = states.DEPLOYWAIT
        with task_manager.acquire(self.context, self.node.uuid) as task:
            task.driver.deploy.bmc_stage_rootfs(task)
            args = mock_execute.call_args[0][1]['args']
            self.assertTrue(args['url'].startswith('http://10.0.2.100'))

    @mock.patch.object(rootfs_build.rootfs, 'get_cache', autospec=True)
    def test_build_of_an_ended_deploy_is_dropped(
            self, mock_cache, mock_resolve, mock_prepare, mock_boot,
            mock_power):
        mock_prepare.return_value = self.artifact
        self._deploy(mock_resolve)
        # The deploy is aborted while the image builds: clean_up ran.
        with task_manager.acquire(self.context, self.node.uuid) as task:
            task.node.del_driver_internal_info('bmc_deploy')
            task.node.save()
        self.executor.run_all()
        mock_cache.return_value.unpin.assert_called_once_with(
            self.artifact.cache_key, self.node.uuid)
        from ironic.conf import CONF
        node_dir = os.path.join(CONF.deploy.http_root, self.node.uuid)
        self.assertFalse(os.path.exists(node_dir)
                         and [n for n in os.listdir(node_dir)
                              if n.startswith('rootfs-')])
        node = objects.Node.get_by_uuid(self.context, self.node.uuid)
        self.assertNotIn(rootfs_build.BUILD_KEY,
                         node.driver_internal_info.get('bmc_deploy', {}))

    @mock.patch.object(container_deploy.manager_utils,
                       'notify_conductor_resume_deploy', autospec=True)
    def test_build_lost_in_a_restart_is_started_again(
            self, mock_resume, mock_resolve, mock_prepare, mock_boot,
            mock_power):
        mock_prepare.return_value = self.artifact
        self._deploy(mock_resolve)
        self.node.refresh()
        self.node.provision_state = states.DEPLOYWAIT
        self.node.deploy_step = {'interface': 'deploy',
                                 'step': 'bmc_stage_rootfs', 'priority': 80,
                                 'args': {}}
        self.node.save()
        with task_manager.acquire(self.context, self.node.uuid) as task:
            rootfs_build.wait(task)
        # The conductor restarts: its worker and the queued build are gone.
        self.executor.submitted.clear()
        rootfs_build._in_progress.clear()
        self.node.refresh()
        self.assertTrue(rootfs_build.orphaned(self.node))
        mock_resolve.reset_mock()
        with task_manager.acquire(self.context, self.node.uuid,
                                  shared=True) as task:
            restart = inspect.unwrap(
                container_deploy.ContainerDeploy._restart_lost_builds)
            restart(task.driver.deploy, task, None, None)
        # The digest the deploy resolved, not the tag (it may have moved).
        container = mock_resolve.call_args[0][1]
        self.assertEqual(IMAGE.rsplit(':', 1)[0] + ':1@sha256:b',
                         container.image)
        self.assertEqual(1, len(self.executor.submitted))
        self.executor.run_all()
        # The step that was waiting is resumed.
        mock_resume.assert_called_once_with(mock.ANY)
        node = objects.Node.get_by_uuid(self.context, self.node.uuid)
        self.assertEqual('ready', rootfs_build.state(node))
        self.assertFalse(rootfs_build.orphaned(node))
        self.assertEqual(1, run_report.get(node)['build_restarts'])

    def _build_on(self, mock_resolve, host, online=True):
        """A deploy whose build runs on conductor ``host``."""
        self._deploy(mock_resolve)
        self.node.refresh()
        self.node.provision_state = states.DEPLOYWAIT
        info = self.node.driver_internal_info['bmc_deploy']
        info[rootfs_build.BUILD_KEY]['conductor'] = host
        self.node.set_driver_internal_info('bmc_deploy', info)
        self.node.save()
        self.executor.submitted.clear()
        rootfs_build._in_progress.clear()
        objects.Conductor.register(self.context, host, ['fake-hardware'],
                                   '')
        if not online:
            # What Ironic makes of a conductor whose heartbeat is older
            # than [conductor]heartbeat_timeout (on sqlite: not online).
            self.dbapi.touch_conductor(host, online=False)
        restart = inspect.unwrap(
            container_deploy.ContainerDeploy._restart_lost_builds)
        with task_manager.acquire(self.context, self.node.uuid,
                                  shared=True) as task:
            self.assertTrue(rootfs_build.orphaned(task.node))
            restart(task.driver.deploy, task, None, None)

    def test_build_on_a_live_conductor_is_left_to_it(
            self, mock_resolve, mock_prepare, mock_boot, mock_power):
        # The hash ring moved the node here (a conductor joined) while
        # the conductor that started the build still runs it.
        self._build_on(mock_resolve, 'other-conductor')
        self.assertEqual([], self.executor.submitted)
        node = objects.Node.get_by_uuid(self.context, self.node.uuid)
        self.assertNotIn('build_restarts', run_report.get(node))

    def test_build_on_a_dead_conductor_is_started_here(
            self, mock_resolve, mock_prepare, mock_boot, mock_power):
        mock_prepare.return_value = self.artifact
        self._build_on(mock_resolve, 'dead-conductor', online=False)
        self.assertEqual(1, len(self.executor.submitted))
        node = objects.Node.get_by_uuid(self.context, self.node.uuid)
        self.assertEqual(1, run_report.get(node)['build_restarts'])
        self.assertEqual(CONF.host, node.driver_internal_info['bmc_deploy'][
            rootfs_build.BUILD_KEY]['conductor'])

    # ``baremetal node rebuild`` runs prepare and the deploy steps on a
    # node that still holds the previous run.
    def test_rebuild_releases_the_previous_run(self, mock_resolve,
                                               mock_prepare, mock_boot,
                                               mock_power):
        mock_prepare.return_value = self.artifact
        with task_manager.acquire(self.context, self.node.uuid) as task:
            old_url = boot_files.publish_artifact(task, self.artifact.path,
                                                  'erofs')
            old = run_report.new(task.node, deploy_info.parse(task.node))
            old['state'] = 'finished'
            run_report.update(task.node, old)
            task.node.set_driver_internal_info(
                'bmc_agent', {'agent_url': 'http://10.0.2.15:9999'})
            task.node.save()
        from ironic.conf import CONF
        old_dir = os.path.join(CONF.deploy.http_root, os.path.dirname(
            old_url[len(CONF.deploy.http_url) + 1:]))
        self.assertTrue(os.path.isdir(old_dir))
        with mock.patch.object(rootfs, 'release', autospec=True) as release:
            self._deploy(mock_resolve)
            release.assert_called_once_with(mock.ANY)
        self.assertFalse(os.path.exists(old_dir))
        self.executor.run_all()
        node = objects.Node.get_by_uuid(self.context, self.node.uuid)
        new = run_report.get(node)
        new_url = node.driver_internal_info['bmc_deploy'][
            'artifact_token_url']
        self.assertNotIn('bmc_agent', node.driver_internal_info)
        self.assertNotEqual(old_url, new_url)
        self.assertNotEqual(old['deploy_id'], new['deploy_id'])
        self.assertEqual('deploying', new['state'])
        self.assertEqual('finished', run_report.load(
            self.node.uuid, old['deploy_id'])['state'])


class RebuildTestCase(ContainerDeployTestCase):

    @mock.patch.object(container_deploy.manager_utils, 'node_power_action',
                       autospec=True)
    @mock.patch.object(run_close, 'stop_workload', autospec=True)
    def test_rebuild_stops_the_workload_before_the_power_goes(
            self, mock_stop, mock_power):
        order = []
        mock_stop.side_effect = lambda task: order.append('stop') or {
            'state': 'exited', 'exit_code': 0, 'output_tail': 'bye\n',
            'stop': {'reason': 'undeploy', 'signal': 'SIGTERM'}}
        mock_power.side_effect = lambda task, state: order.append(state)
        report = run_report.new(self.node, deploy_info.parse(self.node))
        report['state'] = 'running'
        self.node.set_driver_internal_info(run_report.INTERNAL_KEY, report)
        self.node.set_driver_internal_info(
            'bmc_agent', {'agent_url': 'http://10.0.2.15:9999'})
        self.node.power_state = states.POWER_ON
        self.node.save()
        with task_manager.acquire(self.context, self.node.uuid) as task:
            with mock.patch.object(run_close, 'collect', autospec=True,
                                   return_value=None):
                task.driver.deploy.prepare(task)
        self.assertEqual(['stop', states.POWER_OFF], order[:2])
        self.assertEqual('undeployed', run_report.load(
            self.node.uuid, report['deploy_id'])['state'])


class InBandStepsTestCase(ContainerDeployTestCase):

    @mock.patch.object(agent_base, 'execute_step', autospec=True)
    def test_stage_rootfs_sends_args(self, mock_execute):
        mock_execute.return_value = states.DEPLOYWAIT
        self.node.deploy_step = {'interface': 'deploy',
                                 'step': 'bmc_stage_rootfs', 'priority': 80,
                                 'args': {}}
        self.node.set_driver_internal_info('bmc_deploy', {
            'stage_args': {'digest': 'd'}, 'artifact_token_url': 'u',
            'powered_on': 1.0})
        self.node.set_driver_internal_info(
            run_report.INTERNAL_KEY, {'stages': [], 'node': self.node.uuid,
                                      'deploy_id': 'x'})
        self.node.save()
        with task_manager.acquire(self.context, self.node.uuid) as task:
            self.assertEqual(states.DEPLOYWAIT,
                             task.driver.deploy.bmc_stage_rootfs(task))
            step = mock_execute.call_args[0][1]
            self.assertEqual('bmc_stage_rootfs', step['step'])
            # The first in-band step also reads the node's boot marks.
            self.assertEqual({'url': 'u', 'digest': 'd', 'boot_times': True},
                             step['args'])
            stages = run_report.get(task.node)['stages']
            self.assertEqual('agent-up', stages[0]['name'])
            self.assertEqual(1.0, stages[0]['start'])
            info = task.node.driver_internal_info['bmc_deploy']
            # (Stage times are kept to the millisecond.)
            self.assertGreaterEqual(round(info['boot_times_sent'], 3),
                                    stages[0]['end'])
            self.assertIsNone(info['first_heartbeat'])
            # Once only.
            task.driver.deploy.bmc_stage_rootfs(task)
            self.assertNotIn('boot_times', mock_execute.call_args[0][1][
                'args'])

    @mock.patch.object(agent_base, 'execute_step', autospec=True)
    def test_artifact_unpublished_once_staged(self, mock_execute):
        mock_execute.return_value = states.DEPLOYWAIT
        self.node.deploy_step = {'interface': 'deploy',
                                 'step': 'bmc_start_workload',
                                 'priority': 70, 'args': {}}
        self.node.save()
        with task_manager.acquire(self.context, self.node.uuid) as task:
            url = boot_files.publish_artifact(task, self.artifact.path,
                                              'erofs')
            from ironic.conf import CONF
            path = os.path.join(CONF.deploy.http_root,
                                url[len(CONF.deploy.http_url) + 1:])
            task.node.set_driver_internal_info('bmc_deploy', {
                'stage_args': {'digest': 'd', 'rootfs': 'ramfs'},
                'artifact_token_url': url,
                'workload_args': {'command': ['/x']}})
            self.assertTrue(os.path.exists(path))
            task.driver.deploy.bmc_start_workload(task)
            self.assertFalse(os.path.exists(os.path.dirname(path)))
            info = task.node.driver_internal_info['bmc_deploy']
            self.assertNotIn('artifact_token_url', info)
            self.assertEqual({'command': ['/x']},
                             mock_execute.call_args[0][1]['args'])
        node = objects.Node.get_by_uuid(self.context, self.node.uuid)
        self.assertNotIn(url, str(node.driver_internal_info))

    def test_steps_order(self):
        with task_manager.acquire(self.context, self.node.uuid) as task:
            steps = sorted(task.driver.deploy.get_deploy_steps(task),
                           key=lambda s: -s['priority'])
        self.assertEqual(['deploy', 'bmc_apply_tunables',
                          'bmc_stage_rootfs', 'bmc_group_barrier',
                          'bmc_start_workload', 'bmc_record_start'],
                         [s['step'] for s in steps])


def _packed(data, **fields):
    return dict({'data': base64.b64encode(gzip.compress(data)).decode(),
                 'kept': len(data), 'bytes': len(data), 'dropped': 0,
                 'finished': True}, **fields)


class RecordStartTestCase(ContainerDeployTestCase):

    def _deploying(self):
        report = run_report.new(self.node, deploy_info.parse(self.node))
        self.node.set_driver_internal_info(run_report.INTERNAL_KEY, report)
        self.node.set_driver_internal_info('agent_url', 'http://10.0.2.15:1')
        self.node.save()

    @mock.patch.object(container_deploy.agent_calls, 'call', autospec=True)
    def test_agent_quieted_once_the_run_starts(self, mock_call):
        mock_arm = self.arm_soon
        self._deploying()
        mock_call.return_value = {'heartbeats': 'stopped'}
        with task_manager.acquire(self.context, self.node.uuid) as task:
            task.driver.deploy.bmc_record_start(task)
            report = run_report.get(task.node)
            self.assertEqual('running', report['state'])
            self.assertTrue(agent_calls.reachable(task.node))
        mock_call.assert_called_once_with(mock.ANY, 'bmc_quiet_agent',
                                          timeout=30)
        # The first check follows the deploy's end, not the first poll.
        mock_arm.assert_called_once_with(mock.ANY, self.node.uuid,
                                         report['deploy_id'])

    @mock.patch.object(container_deploy.agent_calls, 'call', autospec=True)
    def test_an_agent_that_cannot_be_quieted_is_no_failure(self, mock_call):
        mock_arm = self.arm_soon
        self._deploying()
        mock_call.side_effect = exception.IronicException('old agent')
        with task_manager.acquire(self.context, self.node.uuid) as task:
            task.driver.deploy.bmc_record_start(task)
            self.assertEqual('running', run_report.get(task.node)['state'])
        # It heartbeats anyway: nothing to arm.
        mock_arm.assert_not_called()


class WatchTestCase(ContainerDeployTestCase):

    def _running(self, mode):
        report = {'stages': [], 'node': self.node.uuid, 'deploy_id': 'x',
                  'mode': mode, 'state': 'running'}
        self.node.provision_state = states.ACTIVE
        self.node.target_provision_state = None
        self.node.set_driver_internal_info(run_report.INTERNAL_KEY, report)
        self.node.save()

    @mock.patch.object(container_deploy.manager_utils, 'node_power_action',
                       autospec=True)
    def test_job_exit_records_and_powers_off(self, mock_power):
        self._running('job')
        status = {'state': 'exited', 'exit_code': 3, 'output_tail': 'bye\n',
                  'stages': [{'name': 'workload-started', 'start': 10.0,
                              'end': 10.5},
                             {'name': 'workload-exited', 'start': 10.5,
                              'end': 20.0}]}
        with task_manager.acquire(self.context, self.node.uuid) as task:
            run_close.record_exit(task, status)
            mock_power.assert_called_once_with(task, states.POWER_OFF)
            report = run_report.get(task.node)
        self.assertEqual(3, report['workload_exit_code'])
        self.assertEqual('bye\n', report['output_tail'])
        self.assertEqual('finished', report['state'])
        names = [s['name'] for s in report['stages']]
        self.assertEqual(['workload-exited', 'powered-off'], names[-2:])
        exited = [s for s in report['stages']
                  if s['name'] == 'workload-exited'][0]
        self.assertEqual(20.0, exited['end'])
        # The report outlives the node's fields: it is on disk.
        self.assertEqual(report, run_report.load(self.node.uuid))

    @mock.patch.object(container_deploy.agent_calls, 'call', autospec=True)
    @mock.patch.object(container_deploy.manager_utils, 'node_power_action',
                       autospec=True)
    def test_job_output_and_results_collected_before_power_off(
            self, mock_power, mock_call):
        self._running('job')
        self.node.set_driver_internal_info(deploy_record.KEY, {
            'results': ['/results/out.csv', '/results/missing']})
        self.node.save()
        output = b''.join(b'line %d\n' % i for i in range(2000))
        order = []
        mock_power.side_effect = lambda *a: order.append('power')

        def agent(task, step, args=None, timeout=None):
            order.append(step)
            return {'output': _packed(output, bytes=len(output) + 100,
                                      dropped=100),
                    'results': {
                        '/results/out.csv': dict(
                            _packed(b'a,b\n1,2\n'), size=8),
                        '/results/missing': {'error': 'no such file'}}}
        mock_call.side_effect = agent
        with task_manager.acquire(self.context, self.node.uuid) as task:
            run_close.record_exit(task, {'state': 'exited', 'exit_code': 0,
                                         'output_tail': 'line 1999\n'})
            report = run_report.get(task.node)
        self.assertEqual(['bmc_collect_output', 'power'], order)
        mock_call.assert_called_once_with(
            mock.ANY, 'bmc_collect_output',
            args={'results': ['/results/out.csv', '/results/missing'],
                  'max_bytes': 16 * 1024 * 1024}, timeout=120)
        self.assertEqual({'bytes': len(output) + 100, 'kept': len(output),
                          'dropped': 100, 'complete': False,
                          'sha256': mock.ANY}, report['output'])
        self.assertEqual(8, report['results']['/results/out.csv']['size'])
        self.assertEqual({'error': 'no such file'},
                         report['results']['/results/missing'])
        self.assertEqual(output, run_files.read_output(self.node.uuid, 'x'))
        self.assertEqual(b'a,b\n1,2\n', run_files.read_result(
            self.node.uuid, 'x', '/results/out.csv'))
        self.assertEqual('finished', report['state'])

    @mock.patch.object(container_deploy.agent_calls, 'call', autospec=True)
    @mock.patch.object(container_deploy.manager_utils, 'node_power_action',
                       autospec=True)
    def test_collect_failure_does_not_keep_the_node_on(self, mock_power,
                                                       mock_call):
        self._running('job')
        mock_call.side_effect = exception.IronicException('agent gone')
        with task_manager.acquire(self.context, self.node.uuid) as task:
            run_close.record_exit(task, {'state': 'exited', 'exit_code': 0})
            mock_power.assert_called_once_with(task, states.POWER_OFF)
            report = run_report.get(task.node)
        self.assertIn('agent gone', report['output']['error'])
        self.assertEqual('finished', report['state'])

    def _hostile_collect(self, reply, mock_power, mock_call):
        self._running('job')
        self.node.set_driver_internal_info(deploy_record.KEY, {
            'results': ['/results/out.csv']})
        self.node.save()
        mock_call.return_value = reply
        with task_manager.acquire(self.context, self.node.uuid) as task:
            run_close.record_exit(task, {'state': 'exited', 'exit_code': 0,
                                         'output_tail': ''})
            mock_power.assert_called_once_with(task, states.POWER_OFF)
            report = run_report.get(task.node)
            history = [h.event for h in objects.NodeHistory.list_by_node_id(
                self.context, task.node.id)]
        self.assertEqual('failed', report['state'])
        self.assertIn('were refused: The agent of node %s sent a reply the '
                      'conductor refuses' % self.node.uuid, report['error'])
        self.assertEqual([report['error']], history)
        # Nothing of the run is kept on the conductor.
        self.assertRaises(exception.NotFound, run_files.read_output,
                          self.node.uuid, 'x')
        return report

    @mock.patch.object(container_deploy.agent_calls, 'call', autospec=True)
    @mock.patch.object(container_deploy.manager_utils, 'node_power_action',
                       autospec=True)
    def test_gzip_bomb_in_the_output_fails_the_run(self, mock_power,
                                                   mock_call):
        # 64 MiB of zeros in 64 KiB, past [container]output_max_mb (16).
        bomb = _packed(b'\0' * (64 * 1024 * 1024))
        self.assertLess(len(bomb['data']), 100 * 1024)
        report = self._hostile_collect({'output': bomb}, mock_power,
                                       mock_call)
        self.assertIn('the collected output: expands to more than 16777216 '
                      'bytes', report['error'])

    @mock.patch.object(container_deploy.agent_calls, 'call', autospec=True)
    @mock.patch.object(container_deploy.manager_utils, 'node_power_action',
                       autospec=True)
    def test_result_the_run_did_not_ask_for_fails_the_run(self, mock_power,
                                                          mock_call):
        report = self._hostile_collect(
            {'output': _packed(b'ok\n'),
             'results': {'/results/out.csv': _packed(b'1\n'),
                         '/etc/shadow': _packed(b'root:x\n')}},
            mock_power, mock_call)
        self.assertIn("result files the run did not ask for: '/etc/shadow'",
                      report['error'])
        self.assertRaises(exception.NotFound, run_files.read_result,
                          self.node.uuid, 'x', '/results/out.csv')

    @mock.patch.object(container_deploy.agent_calls, 'call', autospec=True)
    @mock.patch.object(container_deploy.manager_utils, 'node_power_action',
                       autospec=True)
    def test_results_past_their_bound_together_fail_the_run(
            self, mock_power, mock_call):
        self.config(results_max_mb=1, group='container')
        self._running('job')
        self.node.set_driver_internal_info(deploy_record.KEY, {
            'results': ['/a', '/b']})
        self.node.save()
        half = b'x' * (700 * 1024)
        mock_call.return_value = {'output': _packed(b''), 'results': {
            '/a': _packed(half), '/b': _packed(half)}}
        with task_manager.acquire(self.context, self.node.uuid) as task:
            run_close.record_exit(task, {'state': 'exited', 'exit_code': 0})
            report = run_report.get(task.node)
        self.assertEqual('failed', report['state'])
        self.assertIn("result '/b': expands to more than", report['error'])

    @mock.patch.object(container_deploy.manager_utils, 'node_power_action',
                       autospec=True)
    def test_job_ended_at_its_walltime_fails(self, mock_power):
        self._running('job')
        stop = {'reason': 'walltime', 'signal': 'SIGTERM', 'grace': 10.0,
                'killed': True, 'seconds': 10.2, 'requested': 70.0}
        status = {'state': 'exited', 'exit_code': 137, 'output_tail': '',
                  'walltime': 60.0, 'stop': stop, 'stages': []}
        with task_manager.acquire(self.context, self.node.uuid) as task:
            run_close.record_exit(task, status)
            mock_power.assert_called_once_with(task, states.POWER_OFF)
            report = run_report.get(task.node)
            history = [h.event for h in objects.NodeHistory.list_by_node_id(
                self.context, task.node.id)]
        self.assertEqual('failed', report['state'])
        self.assertTrue(report['walltime_exceeded'])
        self.assertEqual(stop, report['stop'])
        self.assertIn('ran for its whole walltime (container_walltime: '
                      '60.0 s) and was ended: SIGTERM, then SIGKILL after '
                      '10.0 s', report['error'])
        self.assertEqual([report['error']], history)

    @mock.patch.object(container_deploy.manager_utils, 'node_power_action',
                       autospec=True)
    def test_service_exit_keeps_power(self, mock_power):
        self._running('service')
        with task_manager.acquire(self.context, self.node.uuid) as task:
            run_close.record_exit(task, {'state': 'exited',
                                                   'exit_code': 0})
        mock_power.assert_not_called()


class CleanUpTestCase(ContainerDeployTestCase):

    @mock.patch.object(container_deploy.manager_utils, 'node_power_action',
                       autospec=True)
    @mock.patch.object(rootfs, 'release', autospec=True)
    @mock.patch.object(boot_files.pxe_utils, 'clean_up_pxe_env',
                       autospec=True)
    def test_clean_up_removes_everything(self, mock_pxe, mock_release,
                                         mock_power):
        self.node.power_state = states.POWER_ON
        self.node.save()
        with task_manager.acquire(self.context, self.node.uuid) as task:
            url = boot_files.publish_artifact(task, self.artifact.path,
                                              'erofs')
            from ironic.conf import CONF
            rel = url[len(CONF.deploy.http_url) + 1:]
            path = os.path.join(CONF.deploy.http_root, rel)
            self.assertTrue(os.path.exists(path))
            task.driver.deploy.clean_up(task)
            self.assertFalse(os.path.exists(os.path.dirname(path)))
            mock_release.assert_called_once_with(task.node)
            mock_power.assert_called_once_with(task, states.POWER_OFF)
            self.assertEqual({'deploy_kernel', 'deploy_ramdisk'},
                             set(mock_pxe.call_args[0][1]))


    @mock.patch.object(container_deploy.manager_utils, 'node_power_action',
                       autospec=True)
    @mock.patch.object(boot_files.pxe_utils, 'clean_up_pxe_env',
                       autospec=True)
    def test_a_failed_deploys_reason_survives_the_power_off(
            self, mock_pxe, mock_power):
        # As Ironic's: a power action outside a failure state clears
        # last_error; a node fast track left on is powered off here.
        def power(task, state):
            task.node.last_error = None
            task.node.power_state = state
            task.node.save()
        mock_power.side_effect = power
        self.node.power_state = states.POWER_ON
        # The deploy step had begun the run's report (state deploying):
        # clean_up closes it first, and powers off there.
        self.node.set_driver_internal_info(
            run_report.INTERNAL_KEY,
            run_report.new(self.node, deploy_info.parse(self.node)))
        self.node.save()
        with task_manager.acquire(self.context, self.node.uuid) as task:
            container_deploy.manager_utils.deploying_error_handler(
                task, 'refused access to reg/private/app:1',
                'Cannot deploy container image reg/private/app:1: refused '
                'access')
        self.node.refresh()
        self.assertEqual(states.DEPLOYFAIL, self.node.provision_state)
        self.assertEqual(states.POWER_OFF, self.node.power_state)
        self.assertIn('refused access', self.node.last_error)
        report = run_report.get(self.node)
        self.assertEqual('failed', report['state'])
        self.assertIn('refused access', report['error'])


@mock.patch.object(container_deploy.manager_utils, 'node_power_action',
                   autospec=True)
@mock.patch.object(container_deploy.energy, 'finish', autospec=True)
@mock.patch.object(container_deploy.agent_calls, 'call', autospec=True)
class UndeployTestCase(ContainerDeployTestCase):
    """Ironic's own order: clean_up, then tear_down (manager.py
    _do_node_tear_down); clean_up alone after a failed deploy."""

    def _active(self, mode, state='running'):
        report = run_report.new(self.node, deploy_info.parse(self.node))
        report.update(mode=mode, state=state, stages=[
            {'name': 'power-on', 'start': 1.0, 'end': 2.0},
            {'name': 'workload-started', 'start': 5.0, 'end': 6.0}])
        self.node.provision_state = states.DELETING
        self.node.target_provision_state = states.AVAILABLE
        self.node.power_state = states.POWER_ON
        self.node.set_driver_internal_info(run_report.INTERNAL_KEY, report)
        self.node.set_driver_internal_info(
            'bmc_agent', {'agent_url': 'http://10.0.2.15:9999'})
        self.node.save()
        return report

    def _undeploy(self):
        with task_manager.acquire(self.context, self.node.uuid) as task:
            task.driver.deploy.clean_up(task)
            task.driver.deploy.tear_down(task)
            return run_report.get(task.node)

    def test_service_run_closed_with_last_state_and_energy(
            self, mock_call, mock_finish, mock_power):
        self._active('service')
        sampling = {'stopped': False}
        stop = {'reason': 'undeploy', 'signal': 'SIGTERM', 'grace': 10.0,
                'killed': False, 'seconds': 0.4, 'requested': 7.0}

        def agent(task, step, args=None, timeout=None):
            # As the real client: no URL, no call.
            if not agent_calls.reachable(task.node):
                raise exception.IronicException('agent URL forgotten')
            if step == 'bmc_collect_output':
                return {'output': _packed(b'serving\nshutting down\n',
                                          bytes=22), 'results': {}}
            return {'state': 'exited', 'exit_code': 0,
                    'output_tail': 'serving\nshutting down\n',
                    'stop': stop, 'rapl': {'available': False},
                    'stages': [{'name': 'workload-started', 'start': 6.0,
                                'end': 6.0},
                               {'name': 'workload-exited', 'start': 6.0,
                                'end': 7.4}]}

        def finish(node, start, end, rapl=None, deploy_id=None):
            if sampling['stopped']:
                return {'available': False, 'reason': 'no power samples'}
            sampling['stopped'] = True
            return {'available': True, 'bmc_samples': 9}

        mock_call.side_effect = agent
        mock_finish.side_effect = finish
        with mock.patch.object(
                container_deploy.energy, 'stop', autospec=True,
                side_effect=lambda node: sampling.update(stopped=True)):
            report = self._undeploy()
        # Stopped gracefully once, before clean_up forgot the agent's URL,
        # then its output collected.
        self.assertEqual([
            mock.call(mock.ANY, 'bmc_stop_workload',
                      args={'grace': 10, 'reason': 'undeploy'}, timeout=40),
            mock.call(mock.ANY, 'bmc_collect_output',
                      args={'results': [], 'max_bytes': 16 * 1024 * 1024},
                      timeout=120)], mock_call.call_args_list)
        self.assertEqual(22, report['output']['bytes'])
        self.assertEqual(b'serving\nshutting down\n', run_files.read_output(
            self.node.uuid, report['deploy_id']))
        mock_finish.assert_called_once_with(
            mock.ANY, 6.0, 7.4, rapl={'available': False},
            deploy_id=report['deploy_id'])
        self.assertEqual({'available': True, 'bmc_samples': 9},
                         report['energy'])
        self.assertEqual('undeployed', report['state'])
        self.assertEqual(stop, report['stop'])
        self.assertEqual(0, report['workload_exit_code'])
        self.assertIn('shutting down', report['output_tail'])
        self.assertIsNone(report['error'])
        self.assertEqual(1, [s['name'] for s in report['stages']]
                         .count('powered-off'))
        self.assertEqual(report, run_report.load(self.node.uuid))

    def test_undeploy_powers_off_when_the_agent_cannot_stop(
            self, mock_call, mock_finish, mock_power):
        self.config(stop_grace_period=3, group='container')
        self._active('service')
        mock_call.side_effect = exception.IronicException('no route')
        mock_finish.return_value = {'available': False, 'reason': 'x'}
        report = self._undeploy()
        mock_call.assert_called_once_with(
            mock.ANY, 'bmc_stop_workload',
            args={'grace': 3, 'reason': 'undeploy'}, timeout=33)
        self.assertEqual('undeployed', report['state'])
        self.assertNotIn('stop', report)
        mock_power.assert_any_call(mock.ANY, states.POWER_OFF)

    def test_finished_job_left_as_it_was(self, mock_call, mock_finish,
                                         mock_power):
        before = self._active('job', state='finished')
        report = self._undeploy()
        mock_call.assert_not_called()
        mock_finish.assert_not_called()
        self.assertEqual(before, report)

    def test_failed_deploy_records_error(self, mock_call, mock_finish,
                                         mock_power):
        self._active('job', state='deploying')
        self.node.provision_state = states.DEPLOYING
        self.node.last_error = 'Cannot deploy container image x: boom'
        self.node.save()
        with task_manager.acquire(self.context, self.node.uuid) as task:
            task.driver.deploy.clean_up(task)
            report = run_report.get(task.node)
        mock_call.assert_not_called()
        self.assertEqual('failed', report['state'])
        self.assertEqual('Cannot deploy container image x: boom',
                         report['error'])
        self.assertEqual(report, run_report.load(self.node.uuid))


@mock.patch.object(container_deploy.manager_utils, 'node_power_action',
                   autospec=True)
class WatcherRaceTestCase(ContainerDeployTestCase):

    def test_exit_not_recorded_on_a_node_undeployed_meanwhile(
            self, mock_power):
        report = run_report.new(self.node, deploy_info.parse(self.node))
        report['state'] = 'running'
        self.node.provision_state = states.ACTIVE
        self.node.target_provision_state = None
        self.node.set_driver_internal_info(run_report.INTERNAL_KEY, report)
        self.node.save()

        def undeployed_meanwhile(task, notify_exit=False):
            # Another request takes the node while the agent is asked.
            other = objects.Node.get_by_uuid(self.context, self.node.uuid)
            other.provision_state = states.DELETING
            other.save()
            return {'state': 'exited', 'exit_code': 0}

        with mock.patch.object(workload_watch, '_status', autospec=True,
                               side_effect=undeployed_meanwhile):
            # What the periodic watch runs in its pool for the node.
            workload_watch._pooled_check(self.context, self.node.uuid)
        node = objects.Node.get_by_uuid(self.context, self.node.uuid)
        self.assertEqual('running', run_report.get(node)['state'])
        self.assertEqual(states.DELETING, node.provision_state)
        mock_power.assert_not_called()


class WatchPoolTestCase(ContainerDeployTestCase):
    """The periodic watch hands nodes to a pool: a silent agent holds up
    no other node's poll, and a node is polled once at a time."""

    def setUp(self):
        super().setUp()
        self.config(workload_watch_workers=2, group='container')
        self.addCleanup(setattr, workload_watch, '_pool', None)
        workload_watch._pool = None
        workload_watch._in_flight.clear()
        self.nodes = [self.node] + [
            obj_utils.create_test_node(
                self.context, uuid=uuidutils.generate_uuid(),
                driver='fake-hardware', deploy_interface='container',
                boot_interface='ipxe', vendor_interface='container',
                network_interface='noop',
                properties=dict(self.node.properties),
                instance_info=dict(self.node.instance_info),
                driver_info=dict(self.node.driver_info))
            for _ in range(2)]
        for node in self.nodes:
            report = run_report.new(node, deploy_info.parse(node))
            report['state'] = 'running'
            node.provision_state = states.ACTIVE
            node.set_driver_internal_info(run_report.INTERNAL_KEY, report)
            node.save()

    def test_a_silent_agent_delays_no_other_node(self):
        silent = threading.Event()
        release = threading.Event()
        polled = []

        def status(task, notify_exit=False):
            if task.node.uuid == self.nodes[0].uuid:
                silent.set()
                release.wait(10)    # an agent that does not answer
                raise exception.IronicException('timed out')
            polled.append(task.node.uuid)
            return {'state': 'running'}

        # The pool's threads see the nodes as loaded here: the test
        # database (SQLite in memory) is not for concurrent threads.
        loaded = {n.uuid: objects.Node.get_by_uuid(self.context, n.uuid)
                  for n in self.nodes}

        @contextlib.contextmanager
        def acquire(context, node_id, shared=False, purpose=None):
            yield types.SimpleNamespace(node=loaded[node_id], shared=True,
                                        context=context)

        watch = inspect.unwrap(
            container_deploy.ContainerDeploy._watch_workload)
        with mock.patch.object(workload_watch, '_status', autospec=True,
                               side_effect=status), \
                mock.patch.object(workload_watch.task_manager, 'acquire',
                                  autospec=True, side_effect=acquire):
            deploy = container_deploy.ContainerDeploy()
            futs = [watch(deploy, types.SimpleNamespace(node=node), None,
                          self.context) for node in self.nodes]
            self.assertTrue(silent.wait(10))
            # The periodic returned at once; the other nodes were polled
            # while the first node's agent still said nothing.
            for fut in [f for f in futs[1:]]:
                fut.result(10)
            self.assertEqual({n.uuid for n in self.nodes[1:]}, set(polled))
            self.assertFalse(futs[0].done())
            # Its poll is still under way: the next period skips it.
            self.assertIsNone(watch(
                deploy, types.SimpleNamespace(node=self.nodes[0]), None,
                self.context))
            release.set()
            futs[0].result(10)
        self.assertEqual(set(), workload_watch._in_flight)


_REAL_STATUS = workload_watch._status


@mock.patch.object(container_deploy.manager_utils, 'node_power_action',
                   autospec=True)
@mock.patch.object(workload_watch, '_status', autospec=True)
class LostRunTestCase(ContainerDeployTestCase):
    """A running workload whose agent stops answering, or forgets it."""

    def setUp(self):
        super().setUp()
        self.config(workload_lost_timeout=120, group='container')
        report = run_report.new(self.node, deploy_info.parse(self.node))
        report['state'] = 'running'
        self.deploy_id = report['deploy_id']
        self.node.provision_state = states.ACTIVE
        self.node.target_provision_state = None
        self.node.power_state = states.POWER_ON
        self.node.set_driver_internal_info(run_report.INTERNAL_KEY, report)
        self.node.save()
        workload_watch._unanswered.clear()

    def _poll(self):
        with task_manager.acquire(self.context, self.node.uuid,
                                  shared=True) as task:
            workload_watch.check(task)
        return objects.Node.get_by_uuid(self.context, self.node.uuid)

    @mock.patch.object(workload_watch.time, 'monotonic', autospec=True)
    def test_silent_agent_loses_the_run_after_the_timeout(
            self, mock_time, mock_status, mock_power):
        mock_status.side_effect = exception.IronicException('timed out')
        mock_time.return_value = 1000.0
        node = self._poll()
        mock_time.return_value = 1119.0
        node = self._poll()
        # Not yet: a conductor or network hiccup is not a lost node.
        self.assertEqual('running', run_report.get(node)['state'])
        mock_power.assert_not_called()
        mock_time.return_value = 1121.0
        node = self._poll()
        report = run_report.get(node)
        self.assertEqual('failed', report['state'])
        self.assertIn('has not answered for 121 seconds', report['error'])
        self.assertIn('workload_lost_timeout', report['error'])
        self.assertEqual(report['error'], node.last_error)
        self.assertEqual(states.ACTIVE, node.provision_state)
        mock_power.assert_called_once_with(mock.ANY, states.POWER_OFF)
        self.assertEqual('failed', run_report.load(
            node.uuid, self.deploy_id)['state'])

    @mock.patch.object(workload_watch.time, 'monotonic', autospec=True)
    def test_an_answer_resets_the_clock(self, mock_time, mock_status,
                                        mock_power):
        mock_time.return_value = 1000.0
        mock_status.side_effect = exception.IronicException('timed out')
        self._poll()
        mock_status.side_effect = None
        mock_status.return_value = {'state': 'running'}
        mock_time.return_value = 1100.0
        self._poll()
        mock_status.side_effect = exception.IronicException('timed out')
        mock_time.return_value = 1200.0
        node = self._poll()
        self.assertEqual('running', run_report.get(node)['state'])
        mock_power.assert_not_called()

    @mock.patch.object(workload_watch.agent_calls, 'call', autospec=True)
    def test_forged_status_fails_the_run_at_once(self, mock_call,
                                                 mock_status, mock_power):
        # The workload (root next to the agent) answers in its place.
        mock_status.side_effect = _REAL_STATUS
        mock_call.return_value = {'state': 'exited',
                                  'exit_code': '0; but trust me',
                                  'output_tail': 'x' * 10}
        node = self._poll()
        report = run_report.get(node)
        self.assertEqual('failed', report['state'])
        self.assertIn('answered outside the protocol', report['error'])
        self.assertIn("the workload status: exit_code is '0; but trust me'",
                      report['error'])
        self.assertIsNone(report['workload_exit_code'])
        self.assertEqual(report['error'], node.last_error)
        mock_power.assert_called_once_with(mock.ANY, states.POWER_OFF)
        # The run is over: the periodic watch no longer reads the node.
        self.assertFalse(workload_watch.watched(node))

    def test_agent_that_forgot_the_workload_loses_the_run(
            self, mock_status, mock_power):
        # The node rebooted into a fresh agent (power lost and restored).
        mock_status.return_value = {'state': 'absent', 'exit_code': None}
        node = self._poll()
        report = run_report.get(node)
        self.assertEqual('failed', report['state'])
        self.assertIn('no longer knows the workload', report['error'])
        self.assertIsNone(report['workload_exit_code'])
        mock_power.assert_called_once_with(mock.ANY, states.POWER_OFF)


class ValidateTestCase(ContainerDeployTestCase):

    def test_neutron_network_refused(self):
        self.node.network_interface = 'neutron'
        self.node.save()
        with task_manager.acquire(self.context, self.node.uuid) as task:
            exc = self.assertRaises(exception.InvalidParameterValue,
                                    task.driver.deploy.validate, task)
        self.assertIn('network interface', str(exc))

    def test_fake_boot_refused(self):
        self.node.boot_interface = 'fake'
        self.node.save()
        with task_manager.acquire(self.context, self.node.uuid) as task:
            exc = self.assertRaises(exception.InvalidParameterValue,
                                    boot_files.validate, task)
        self.assertIn('--boot-interface ipxe', str(exc))

    def test_known_too_large_image_refused(self):
        self.node.instance_info = {
            'container_image': 'r/a@sha256:' + 'b' * 64}
        self.node.save()
        entry = artifact_cache.CacheEntry(
            key='k', path='/nonexistent',
            meta={'unpacked_size': 2 * 1024 ** 3})
        with mock.patch.object(rootfs.get_cache(), 'lookup', autospec=True,
                               return_value=entry):
            with task_manager.acquire(self.context, self.node.uuid) as task:
                from ironic_bmc import deploy_info
                exc = self.assertRaises(
                    exception.InvalidParameterValue,
                    rootfs.check_known_size, task.node,
                    deploy_info.parse(task.node))
        self.assertIn('instance_info/container_image', str(exc))
        self.assertIn('2048 MiB', str(exc))


class VendorTestCase(ContainerDeployTestCase):

    def test_run_report(self):
        self.node.set_driver_internal_info(run_report.INTERNAL_KEY,
                                           {'deploy_id': 'x', 'state': 'r'})
        self.node.save()
        with task_manager.acquire(self.context, self.node.uuid) as task:
            self.assertEqual('r', task.driver.vendor.run_report(task)['state'])
            self.assertRaises(exception.InvalidParameterValue,
                              task.driver.vendor.validate, task,
                              method='run_report', deploy_id='../../etc')
            self.assertRaises(exception.InvalidParameterValue,
                              task.driver.vendor.validate, task,
                              method='other')


    def test_run_output_and_result(self):
        deploy_id = uuidutils.generate_uuid()
        self.node.set_driver_internal_info(run_report.INTERNAL_KEY, {
            'deploy_id': deploy_id, 'state': 'finished',
            'output': {'bytes': 12, 'dropped': 2}})
        self.node.save()
        run_files.save(self.node, deploy_id, {
            'output': _packed(b'all of it\n'),
            'results': {'/r/x.bin': _packed(b'\x00\x01')}}, ['/r/x.bin'])
        with task_manager.acquire(self.context, self.node.uuid) as task:
            vendor = task.driver.vendor
            vendor.validate(task, method='run_output')
            self.assertEqual({'deploy_id': deploy_id,
                              'output': 'all of it\n', 'bytes': 12,
                              'dropped': 2}, vendor.run_output(task))
            got = vendor.run_output(task, result='/r/x.bin')
            self.assertEqual(b'\x00\x01',
                             base64.b64decode(got['data_base64']))
            self.assertEqual(2, got['size'])
            self.assertRaisesRegex(exception.NotFound, 'no result /r/y',
                                   vendor.run_output, task, result='/r/y')
            self.assertRaisesRegex(exception.InvalidParameterValue,
                                   'absolute path of a result file',
                                   vendor.validate, task,
                                   method='run_output', result='r/x.bin')
            self.assertRaises(exception.InvalidParameterValue,
                              vendor.run_output, task, result='/../r/x.bin')

    def test_run_output_before_the_run_ended(self):
        self.node.set_driver_internal_info(run_report.INTERNAL_KEY, {
            'deploy_id': uuidutils.generate_uuid(), 'state': 'running'})
        self.node.save()
        with task_manager.acquire(self.context, self.node.uuid) as task:
            self.assertRaisesRegex(exception.NotFound,
                                   'has not ended yet',
                                   task.driver.vendor.run_output, task)


class TunablesTestCase(ContainerDeployTestCase):

    def test_unknown_knob_refused_at_validate(self):
        self.node.instance_info = dict(self.node.instance_info,
                                       container_tunables={'thp_enable': 1})
        self.node.save()
        with task_manager.acquire(self.context, self.node.uuid) as task:
            exc = self.assertRaises(exception.InvalidParameterValue,
                                    tuning.requested, task.node)
        self.assertIn('instance_info/container_tunables', str(exc))
        self.assertIn('thp_enable', str(exc))

    def test_unknown_profile_refused(self):
        self.node.instance_info = dict(self.node.instance_info,
                                       container_tunables='turbo')
        self.node.save()
        with task_manager.acquire(self.context, self.node.uuid) as task:
            exc = self.assertRaises(exception.InvalidParameterValue,
                                    tuning.requested, task.node)
        self.assertIn('turbo', str(exc))

    def test_profile_and_template_args_merge(self):
        self.node.instance_info = dict(self.node.instance_info,
                                       container_tunables='thp-always')
        self.node.save()
        with task_manager.acquire(self.context, self.node.uuid) as task:
            self.assertEqual({'thp': 'always'}, tuning.requested(task.node))
            knobs = tuning.requested(task.node,
                                     step_args={'thp': 'never',
                                                'hugepages': 16})
        self.assertEqual('never', knobs['thp'])
        self.assertEqual(16, knobs['hugepages'])

    def test_template_args_found_in_deploy_steps(self):
        self.node.set_driver_internal_info('deploy_steps', [
            {'interface': 'deploy', 'step': 'bmc_apply_tunables',
             'priority': 85, 'args': {'tunables': 'thp-never'}}])
        self.node.save()
        with task_manager.acquire(self.context, self.node.uuid) as task:
            self.assertEqual({'thp': 'never'}, tuning.requested(task.node))

    @mock.patch.object(agent_base, 'execute_step', autospec=True)
    def test_strict_reaches_the_agent(self, mock_execute):
        mock_execute.return_value = None
        self.node.instance_info = dict(self.node.instance_info,
                                       container_tunables='thp-never',
                                       container_tunables_strict='true')
        self.node.deploy_step = {'interface': 'deploy', 'priority': 85,
                                 'step': 'bmc_apply_tunables', 'args': {}}
        self.node.set_driver_internal_info('bmc_deploy', {
            'powered_on': 1.0, 'tunables_strict': deploy_info.parse(
                self.node).tunables_strict})
        self.node.set_driver_internal_info(run_report.INTERNAL_KEY, {
            'stages': [], 'node': self.node.uuid, 'deploy_id': 'x'})
        self.node.save()
        with task_manager.acquire(self.context, self.node.uuid) as task:
            with mock.patch.object(container_deploy.service_steps,
                                   'noise_probe', autospec=True):
                task.driver.deploy.bmc_apply_tunables(task)
        self.assertEqual({'tunables': {'thp': 'never'}, 'strict': True,
                          'boot_times': True},
                         mock_execute.call_args.args[1]['args'])

    def test_strict_must_be_a_boolean(self):
        self.node.instance_info = dict(self.node.instance_info,
                                       container_tunables_strict='maybe')
        exc = self.assertRaises(exception.InvalidParameterValue,
                                deploy_info.parse, self.node)
        self.assertIn('instance_info/container_tunables_strict must be true '
                      'or false, got \'maybe\'', str(exc))
        self.node.instance_info['container_tunables_strict'] = 'no'
        self.assertFalse(deploy_info.parse(self.node).tunables_strict)

    def _thp_never_template(self):
        objects.DeployTemplate(
            self.context, uuid=uuidutils.generate_uuid(),
            name='CUSTOM_BMC_TUNABLES_THP_NEVER',
            steps=[{'interface': 'deploy', 'step': 'bmc_apply_tunables',
                    'args': {'tunables': 'thp-never'},
                    'priority': 85}]).create()

    def test_trait_without_its_template_refused_at_validate(self):
        self._thp_never_template()
        self.node.instance_info = dict(
            self.node.instance_info, traits=[
                'CUSTOM_BMC_TUNABLES_THP_NEVER', 'CUSTOM_GPU',
                'CUSTOM_BMC_TUNABLES_LOW_NOISE'])
        self.node.save()
        with task_manager.acquire(self.context, self.node.uuid) as task:
            exc = self.assertRaises(exception.InvalidParameterValue,
                                    tuning.check_templates, task)
        # Only ours without a template; other traits are not our business.
        self.assertIn('instance_info/traits: CUSTOM_BMC_TUNABLES_LOW_NOISE '
                      'select(s) a tunables profile', str(exc))
        self.assertNotIn('THP_NEVER', str(exc))
        self.assertNotIn('CUSTOM_GPU', str(exc))
        self.assertIn('ironic-bmc-deploy-templates', str(exc))

    def test_traits_with_templates_pass(self):
        self._thp_never_template()
        self.node.instance_info = dict(
            self.node.instance_info,
            traits=['CUSTOM_BMC_TUNABLES_THP_NEVER', 'CUSTOM_GPU'])
        self.node.save()
        with task_manager.acquire(self.context, self.node.uuid) as task:
            tuning.check_templates(task)

    def test_boot_time_knobs_become_kernel_args(self):
        runtime, args = tuning.split({'isolcpus': '1-3', 'thp': 'never'})
        self.assertEqual({'thp': 'never'}, runtime)
        self.assertIn('isolcpus=1-3', args)

    def test_service_step_refuses_boot_time_knobs(self):
        exc = self.assertRaises(exception.InvalidParameterValue,
                                tuning.runtime_only, {'isolcpus': '1'},
                                'service step')
        self.assertIn('isolcpus', str(exc))
        self.assertIn('need a reboot', str(exc))

    @mock.patch.object(agent_calls, 'call', autospec=True)
    def test_service_step_applies_on_running_node(self, mock_call):
        mock_call.return_value = {'tunables': {'thp': {
            'requested': 'never', 'previous': 'always', 'actual': 'never',
            'ok': True, 'supported': True}}}
        self.node.provision_state = states.ACTIVE
        self.node.set_driver_internal_info(agent_calls.AGENT_KEY,
                                           {'agent_url': 'https://x:9999'})
        self.node.set_driver_internal_info(
            run_report.INTERNAL_KEY, {'node': self.node.uuid,
                                      'deploy_id': 'x', 'stages': []})
        self.node.save()
        with task_manager.acquire(self.context, self.node.uuid) as task:
            # Through Ironic's dispatch, as servicing calls it: the step
            # runs here, not handed to the agent as an in-band step.
            steps = {s['step'] for s in
                     task.driver.deploy.get_service_steps(task)}
            self.assertEqual({'bmc_set_tunables', 'bmc_noise_probe'}, steps)
            result = task.driver.deploy.execute_service_step(task, {
                'interface': 'deploy', 'step': 'bmc_set_tunables',
                'args': {'tunables': 'thp-never'}})
            self.assertIsNone(result)
            mock_call.assert_called_once_with(
                task, 'bmc_apply_tunables', {'tunables': {'thp': 'never'}})
            report = run_report.get(task.node)
        self.assertTrue(report['tunables']['thp']['ok'])

    def test_service_step_needs_running_agent(self):
        with task_manager.acquire(self.context, self.node.uuid) as task:
            self.assertRaises(exception.NodeServicingFailure,
                              task.driver.deploy.bmc_set_tunables, task,
                              tunables='thp-never')


class HardwareTypesTestCase(ContainerDeployTestCase):

    def test_offer_container_interfaces_first(self):
        from ironic_bmc.drivers import hardware
        from ironic_bmc.drivers import vendor
        for hw in (hardware.ContainerIPMIHardware(),
                   hardware.ContainerRedfishHardware(),
                   hardware.ContainerFakeHardware()):
            self.assertIs(container_deploy.ContainerDeploy,
                          hw.supported_deploy_interfaces[0])
            self.assertIs(vendor.ContainerVendor,
                          hw.supported_vendor_interfaces[0])
            # Everything the base type offers stays available.
            self.assertGreater(len(hw.supported_deploy_interfaces), 3)

    def test_fake_hardware_boots_through_ipxe(self):
        from ironic.drivers.modules import fake
        from ironic.drivers.modules import ipxe
        from ironic_bmc.drivers import hardware
        hw = hardware.ContainerFakeHardware()
        self.assertEqual([fake.FakePower], hw.supported_power_interfaces)
        self.assertIn(ipxe.iPXEBoot, hw.supported_boot_interfaces)


class ReportRetentionTestCase(ContainerDeployTestCase):

    def _run(self, node_uuid, deploy_id, age_days, now):
        run_files.save(types.SimpleNamespace(uuid=node_uuid), deploy_id,
                       {'output': _packed(b'out\n'),
                        'results': {'/r': _packed(b'1')}}, ['/r'])
        run_report._write({'node': node_uuid, 'deploy_id': deploy_id})
        base = os.path.join(CONF.container.report_dir, node_uuid, deploy_id)
        for path in (base + '.json', base + '.output.log'):
            os.utime(path, (now - age_days * 86400,) * 2)

    def test_old_runs_deleted_but_each_nodes_newest(self):
        now = time.time()
        a, b = uuidutils.generate_uuid(), uuidutils.generate_uuid()
        self._run(a, 'old', 40, now)
        self._run(a, 'recent', 10, now)
        self._run(b, 'only', 400, now)     # b's newest: kept however old
        self.assertEqual(1, run_files.prune(30, now=now))
        self.assertRaises(exception.NotFound, run_files.read_output, a,
                          'old')
        self.assertRaises(exception.NotFound, run_files.read_result, a,
                          'old', '/r')
        self.assertIsNone(run_report.load(a, 'old'))
        self.assertEqual(b'out\n', run_files.read_output(a, 'recent'))
        self.assertEqual(b'out\n', run_files.read_output(b, 'only'))
        self.assertEqual(0, run_files.prune(0, now=now))
