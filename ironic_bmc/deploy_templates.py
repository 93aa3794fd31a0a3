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

"""``ironic-bmc-deploy-templates``: one Ironic deploy template a profile.

Profile ``thp-never`` gets the template ``CUSTOM_BMC_TUNABLES_THP_NEVER``
whose step is ``deploy.bmc_apply_tunables`` (priority 85) with
``{"tunables": "thp-never"}``.  Nova copies a flavor's required traits
into the node's ``instance_info/traits``; Ironic adds the step of each
template named by one of them to the deployment, and the conductor
resolves the profile (boot-time knobs become kernel arguments).

Templates are created, updated when their step or extra differ, else left
alone; ``extra/bmc_profile`` marks the ones this command made, and only
those are ever deleted (``--prune``, when their profile is gone).
Credentials: the usual ``OS_*`` variables or ``--os-*`` options
(keystoneauth), e.g. ``OS_AUTH_TYPE=none`` and ``OS_ENDPOINT``.
"""

import argparse
import json
import logging
import os
import re
import sys

from ironicclient import exc as ironic_exc
from keystoneauth1 import exceptions as ks_exc
from keystoneauth1 import loading

from bmc_common import protocol
from bmc_common.tunables import profiles
from bmc_common.tunables import schema

PREFIX = protocol.TUNABLES_TRAIT_PREFIX
INTERFACE = 'deploy'
STEP = protocol.STEP_APPLY_TUNABLES
PRIORITY = 85
#: extra key naming the profile of a template this command made.
MARK = 'bmc_profile'
#: Deploy templates appeared in Bare Metal API 1.55.
API_VERSION = '1.55'
_MAPPABLE = re.compile(r'^[A-Za-z0-9][A-Za-z0-9_-]*$')


class Error(Exception):
    """A profile or template problem an operator can act on."""


def template_name(profile):
    """The trait (and template name) that selects ``profile``."""
    if not isinstance(profile, str) or not _MAPPABLE.match(profile):
        raise Error('profile %r cannot be a deploy template: a trait takes '
                    'letters, digits, "-" and "_" only' % (profile,))
    name = PREFIX + profile.replace('-', '_').upper()
    if len(name) > 255:
        raise Error('profile %r cannot be a deploy template: a trait has '
                    'at most 255 characters' % (profile,))
    return name


def _step(profile):
    return {'interface': INTERFACE, 'step': STEP,
            'args': {'tunables': profile}, 'priority': PRIORITY}


def _reason(exc, profile):
    """A profile error without the leads that repeat what we say."""
    text = str(exc)
    for lead in (schema.PREFIX + ': ', 'profile %r: ' % profile):
        text = text[len(lead):] if text.startswith(lead) else text
    return text


def templates(profile_names=None, search_dirs=None):
    """The deploy templates of ``profile_names`` (default: every profile).

    Each profile must load and validate: a broken one is an Error naming
    the profile and its file.
    """
    names = (list(profile_names) if profile_names
             else profiles.available(search_dirs))
    result, seen = [], {}
    for profile in names:
        name = template_name(profile)
        if name in seen and seen[name] != profile:
            raise Error('profiles %r and %r both map to %s'
                        % (seen[name], profile, name))
        if name in seen:
            continue
        seen[name] = profile
        try:
            path = profiles.find(profile, search_dirs)
        except schema.TunableError as exc:
            raise Error(_reason(exc, profile)) from exc
        try:
            profiles.load(profile, search_dirs)
            summary = profiles.describe(profile, search_dirs)['summary']
        except schema.TunableError as exc:
            raise Error('profile %r (%s) is broken: %s'
                        % (profile, path, _reason(exc, profile))) from exc
        result.append({'name': name, 'steps': [_step(profile)],
                       'extra': {MARK: profile, 'summary': summary}})
    return result


def _ours(step):
    return step.get('interface') == INTERFACE and step.get('step') == STEP


def _norm(step):
    return dict(step, priority=int(step.get('priority', 0)),
                args=step.get('args') or {})


def _wanted(existing, template):
    """(steps, extra) ``existing`` should have: its other steps and extra
    keys are kept, our step replaced in place (or added)."""
    steps, added = [], False
    for step in existing.steps or []:
        if not _ours(step):
            steps.append(_norm(step))
        elif not added:
            steps.extend(template['steps'])
            added = True
    if not added:
        steps.extend(template['steps'])
    return steps, dict(existing.extra or {}, **template['extra'])


def apply(client, templates, out, keep_profiles=None):
    """Create or update ``templates`` through an ironicclient ``client``.

    With ``keep_profiles`` (a collection of profile names) also delete the
    templates marked with ``extra/bmc_profile`` whose profile is not in
    it.  Writes one line a template to ``out``; returns
    ``{"created", "updated", "unchanged", "deleted"}`` lists of names.
    """
    api = client.deploy_template
    current = {t.name: t for t in api.list(detail=True, limit=0)}
    done = {'created': [], 'updated': [], 'unchanged': [], 'deleted': []}
    for template in templates:
        name = template['name']
        existing = current.get(name)
        if existing is None:
            api.create(name=name, steps=template['steps'],
                       extra=template['extra'])
            action = 'created'
        else:
            steps, extra = _wanted(existing, template)
            patch = []
            if [_norm(s) for s in existing.steps or []] != steps:
                patch.append({'op': 'replace', 'path': '/steps',
                              'value': steps})
            if (existing.extra or {}) != extra:
                patch.append({'op': 'replace', 'path': '/extra',
                              'value': extra})
            if patch:
                api.update(existing.uuid, patch)
            action = 'updated' if patch else 'unchanged'
        done[action].append(name)
        out.write('%-40s %-9s %s\n' % (name, action,
                                       template['extra'][MARK]))
    if keep_profiles is not None:
        keep = set(keep_profiles)
        for name, existing in sorted(current.items()):
            profile = (existing.extra or {}).get(MARK)
            if (profile and profile not in keep
                    and name.startswith(PREFIX)):
                api.delete(existing.uuid)
                done['deleted'].append(name)
                out.write('%-40s %-9s %s\n' % (name, 'deleted', profile))
    out.write('%s\n' % ', '.join('%d %s' % (len(v), k)
                                 for k, v in done.items()))
    return done


def _advice(templates, out):
    out.write('\nA flavor asks for a profile with its trait; the nodes it '
              'may land on must carry the trait too:\n')
    for template in templates:
        name = template['name']
        out.write('  openstack flavor set <flavor> --property '
                  'trait:%s=required\n' % name)
        out.write('  openstack baremetal node add trait <node> %s\n' % name)


def _parser(argv):
    parser = argparse.ArgumentParser(
        prog='ironic-bmc-deploy-templates',
        description='Create or update one Ironic deploy template per '
                    'tunables profile (trait %s<PROFILE>).' % PREFIX)
    parser.add_argument('--profile', action='append', metavar='NAME',
                        help='a profile to publish (repeatable; default: '
                             'every profile found)')
    parser.add_argument('--profile-dir', action='append', metavar='DIR',
                        default=[],
                        help='operator profile directory, searched before '
                             'the shipped profiles (repeatable; give the '
                             'conductors\' [container]tunables_profile_dirs)')
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument('--dry-run', action='store_true',
                      help='print the templates as JSON; no API call')
    mode.add_argument('--prune', action='store_true',
                      help='also delete templates made by this command '
                           'whose profile no longer exists')
    parser.add_argument('--debug', action='store_true',
                        help='log the API requests on stderr')
    parser.add_argument('--os-region-name', metavar='NAME',
                        default=os.environ.get('OS_REGION_NAME'),
                        help='Defaults to env[OS_REGION_NAME].')
    parser.add_argument('--os-interface', metavar='NAME',
                        default=os.environ.get('OS_INTERFACE'),
                        help='Defaults to env[OS_INTERFACE].')
    loading.register_session_argparse_arguments(parser)
    loading.register_auth_argparse_arguments(parser, argv, default='password')
    return parser


def _client(args):
    # Imported here: it loads openstacksdk, not needed by --dry-run.
    from ironicclient import client as ironic_client

    auth = loading.load_auth_from_argparse_arguments(args)
    session = loading.load_session_from_argparse_arguments(args, auth=auth)
    return ironic_client.get_client(
        '1', session=session, os_ironic_api_version=API_VERSION,
        region_name=args.os_region_name, interface=args.os_interface)


def main(argv=None):
    """The console script: 0 done, 1 error (one line on stderr), 2 usage."""
    argv = sys.argv[1:] if argv is None else list(argv)
    try:
        args = _parser(argv).parse_args(argv)
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else 2
    except ks_exc.NoMatchingPlugin as exc:
        print('ironic-bmc-deploy-templates: %s' % exc, file=sys.stderr)
        return 2
    if args.debug:
        logging.basicConfig(level=logging.DEBUG)
    elif not logging.getLogger().handlers:
        # ironicclient logs each retry; the error line below says it all.
        logging.getLogger().addHandler(logging.NullHandler())
    dirs = args.profile_dir
    try:
        wanted = templates(args.profile, dirs)
        if args.dry_run:
            json.dump(wanted, sys.stdout, indent=2, sort_keys=True)
            sys.stdout.write('\n')
            return 0
        client = _client(args)
        keep = profiles.available(dirs) if args.prune else None
        apply(client, wanted, sys.stdout, keep_profiles=keep)
    except (Error, ironic_exc.ClientException,
            ks_exc.ClientException) as exc:
        message = ' '.join(str(exc).split()) or type(exc).__name__
        print('ironic-bmc-deploy-templates: %s' % message, file=sys.stderr)
        return 1
    _advice(wanted, sys.stdout)
    return 0


if __name__ == '__main__':
    sys.exit(main())
