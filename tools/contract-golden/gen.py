# Writes testdata/scienceboard/contract/golden.json: request/reply pairs of the real
# ScienceBoard contract, written by hand from the sources each pair names.
# Run from anywhere: python3 tools/contract-golden/gen.py
import json
import os
ROOT=os.path.join(os.path.dirname(os.path.abspath(__file__)),'..','..')
T=os.path.join(ROOT,'testdata/scienceboard/tasks/VM/')
def task(p): 
    t=json.load(open(T+p)); 
    return {k:t[k] for k in ('type','initialize','evaluate','query','snapshot') if k in t}
J='application/json'
def G(method,path,**kw): r={'server':'guest','method':method,'path':path}; r.update(kw); return r
def A(method,path,**kw): r={'server':'app','method':method,'path':path}; r.update(kw); return r
EXEC_OK={'status':200,'body_json':{'status':'success','output':'','error':'','returncode':0}}
OK={'status':200,'body':'OK'}
def launched(cmd): return {'status':200,'body':cmd+' launched successfully'}
def cx(note=None, err=None):
    return {'status':200,'body_json':{'json values':[None],'python values':[None],'log messages':{'note':note or [],'warning':[],'error':[],'bug':[]},'error':err}}
def cxrun(cmd): return G('POST','/chimerax/run',content_type=J,body_json={'command':cmd})
pairs=[]
SB='OS-Copilot/ScienceBoard 9896c9b '
# ---- KAlgebra setup: launch, tab, func_2d, func_3d, touch
kal_launch='LD_LIBRARY_PATH=/home/user/6.5.0/gcc_64/lib /app/bin/kalgebra 8000'
pairs.append({'name':'KAlgebra setup: launch, tab, func_2d, touch','phase':'initialize',
 'source':SB+'sci/vm/vtask.py VTask._launch, sci/base/init.py vm_touch, sci/vm/vmanager.py write_file, sci/KAlgebra/kalgebra.py operate_tab/operate_func2d; ShiinaHiiragi/kalgebra src/main.cpp',
 'task':{'type':'KAlgebra','initialize':[
   {'func':'launch','wait':2.5,'command':'LD_LIBRARY_PATH=/home/user/6.5.0/gcc_64/lib /app/bin/kalgebra «PORTLIKE»','shell':True},
   {'func':'tab','index':1},{'func':'func_2d','expr':'q->6*sin(3*q)'},
   {'func':'touch','text':'a := vector{-1, root(3, 3)}','path':'/home/user/script.kal'}],'evaluate':[{'type':'stop','value':'DONE'}]},
 'exchanges':[
   {'request':G('POST','/setup/launch',content_type=J,body_json={'command':kal_launch,'shell':True}),'reply':launched(kal_launch)},
   {'request':A('POST','/tab',content_type=J,body='1'),'reply':OK},
   {'request':A('POST','/add/2d',body='q->6*sin(3*q)'),'reply':OK},
   {'request':G('POST','/write',content_type=J,body_json={'path':'/home/user/script.kal','content':'a := vector{-1, root(3, 3)}'}),'reply':OK}],
 'covers':['KAlgebra/launch','KAlgebra/tab','KAlgebra/func_2d','KAlgebra/touch']})
pairs.append({'name':'KAlgebra setup: func_3d','phase':'initialize',
 'source':SB+'sci/KAlgebra/kalgebra.py operate_func3d (requests data=expr: raw text, no content type)',
 'task':{'type':'KAlgebra','initialize':[{'func':'launch','wait':2.5,'command':'LD_LIBRARY_PATH=/home/user/6.5.0/gcc_64/lib /app/bin/kalgebra «PORTLIKE»','shell':True},{'func':'func_3d','expr':'x^2-y^2=2'}],'evaluate':[{'type':'stop','value':'DONE'}]},
 'exchanges':[
   {'request':G('POST','/setup/launch',content_type=J,body_json={'command':kal_launch,'shell':True}),'reply':launched(kal_launch)},
   {'request':A('POST','/add/3d',body='x^2-y^2=2'),'reply':OK}],
 'covers':['KAlgebra/func_3d']})
# 'stage' (evaluate entries): requests the harness does not send, which bring a VM,
# after the task's setup, to the state the golden replies describe (README.md)
kal_stage=[G('POST','/setup/launch',content_type=J,body_json={'command':kal_launch,'shell':True}),
 A('POST','/add/calc',body='a := 3.0000001'),A('POST','/add/calc',body='f := x->x^2'),A('POST','/add/2d',body='x->x^2')]
# KAlgebra eval: val, var, eqn (points and #SIZE), stop
pairs.append({'name':'KAlgebra checks: val, var, eqn #SIZE','phase':'evaluate','final':{'kind':'DONE'},
 'source':SB+'sci/KAlgebra/task.py _eval_val/_eval_var/_eval_eqn, kalgebra.py status_vars/status_func',
 'task':{'type':'KAlgebra','initialize':[],'evaluate':[{'type':'val','key':'a','value':3},{'type':'var','key':'f','value':'x->x^2'},{'type':'var','key':'g','value':'#UNDEF'},{'type':'eqn','key':'#SIZE','value':0},{'type':'stop','value':'DONE'}]},
 'exchanges':[
   {'request':A('GET','/vars'),'reply':{'status':200,'body_json':{'a':'3.0000001','f':'x->x^2'}}},
   {'request':A('GET','/vars'),'reply':{'status':200,'body_json':{'a':'3.0000001','f':'x->x^2'}}},
   {'request':A('GET','/vars'),'reply':{'status':200,'body_json':{'a':'3.0000001','f':'x->x^2'}}},
   {'request':A('POST','/func/2d',content_type=J,body_json=[]),'reply':{'status':200,'body_json':[]}}],
 'stage':kal_stage,
 'passed':True,'covers':['KAlgebra/val','KAlgebra/var','KAlgebra/eqn','KAlgebra/stop']})
t=task('KAlgebra/A-02.json'); pts=t['evaluate'][0]['key']; val=t['evaluate'][0]['value']
plot={'expr':'x->x^2','color':'#000000','res':832}; plot.update({k:(not v) for k,v in val.items()})
plot2={'expr':'q->6*sin(3*q)','color':'#ff0000','res':832}; plot2.update(val)
pairs.append({'name':'KAlgebra A-02: eqn over points','phase':'evaluate','final':{'kind':'DONE'},
 'source':SB+'sci/KAlgebra/task.py _eval_eqn: any plot with every key equal; kalgebra.py status_func posts json=points to /func/{len(points[0])}d',
 'task':{'type':'KAlgebra','initialize':[],'evaluate':t['evaluate']},
 'exchanges':[{'request':A('POST','/func/2d',content_type=J,body_json=pts),'reply':{'status':200,'body_json':[plot,plot2]}}],
 'stage':kal_stage,
 'passed':True,'covers':['KAlgebra/eqn']})
# ---- Celestia
cel_launch='LD_LIBRARY_PATH=/home/user/6.5.0/gcc_64/lib /app/bin/celestia-qt6 8000'
t=task('Celestia/A-01.json')
ent={'position':[1.0,2.0,3.0],'distance':12.5,'visible':True,'hidden':False,'mark':None}
dump={'time':{'value':2400000.05,'scale':1.0,'pause':False},'entity':{'observer':{'position':[0.0,0.0,0.0]},'Mercury':ent},'config':{'render':{'orbits':True},'orbit':{},'label':{},'resolution':1,'starStyle':0,'autoMagnitude':6.0}}
pairs.append({'name':'Celestia setup: opt, launch','phase':'initialize',
 'source':SB+'sci/vm/vtask.py VTask._opt and _launch; vm_config/server.py /opt',
 'task':{'type':'Celestia','initialize':t['initialize'],'evaluate':t['evaluate']},
 'exchanges':[{'request':G('POST','/opt',content_type=J,body_json={'depth':6}),'reply':OK},
   {'request':G('POST','/setup/launch',content_type=J,body_json={'command':cel_launch,'shell':True}),'reply':launched(cel_launch)}],
 'covers':['Celestia/opt','Celestia/launch']})
pairs.append({'name':'Celestia check: info with a query','phase':'evaluate','final':{'kind':'ANS','answer':'12.5'},
 'source':SB+'sci/Celestia/task.py TaskMixin.eval, celestia.py status_dump (data=json.dumps(query), no content type); ShiinaHiiragi/Celestia qtmain.cpp /dump',
 'task':{'type':'Celestia','initialize':[],'query':[{'name':'Mercury','type':2}],'evaluate':[{'type':'info','key':"lambda dump: dump['time']['value']",'value':2400000,'pred':'lambda key, value: abs(key - value) < 0.1'},{'type':'info','key':"lambda dump: dump['entity']['Mercury']['visible']",'value':True},{'type':'stop','value':'ANS','args':['12.5']}]},
 'exchanges':[{'request':A('POST','/dump',body='[{"name": "Mercury", "type": 2}]'),'reply':{'status':200,'body_json':dump}}],
 'stage':[G('POST','/setup/launch',content_type=J,body_json={'command':cel_launch,'shell':True})],
 'passed':True,'covers':['Celestia/info','Celestia/stop']})
# ---- ChimeraX
cx_launch=['chimerax','--cmd','remotecontrol rest start json true port 8000']
rm=['rm','/home/user/.local/share/ChimeraX/commands','/home/user/.local/share/ChimeraX/file_history','/home/user/.local/share/ChimeraX/preregistration']
pairs.append({'name':'ChimeraX setup: execute, launch, clear_log, open, turn, color, alphafold_match','phase':'initialize',
 'source':SB+'sci/ChimeraX/task.py _open/_turn/_color/_clear_log/_alphafold_match, chimerax.py VMManager._execute (POST :5000/chimerax/run json command); vm_config/server.py chimerax_run; ChimeraX remote_control REST reply',
 'task':{'type':'ChimeraX','initialize':[{'func':'execute','command':rm},{'func':'execute','command':'rm -f /home/user/.config/ChimeraX/ui-*','shell':True},
   {'func':'launch','wait':7.5,'command':['chimerax','--cmd','remotecontrol rest start json true port «PORTLIKE»']},
   {'func':'clear_log'},{'func':'open','name':'3ppd'},{'func':'turn','axis':'y','angle':1},{'func':'color','style':'rainbow'},{'func':'color','style':'bypolymer'},{'func':'alphafold_match','name':'A8Z1J3'}],'evaluate':[{'type':'stop','value':'DONE'}]},
 'exchanges':[
   {'request':G('POST','/setup/execute',content_type=J,body_json={'command':rm,'shell':False}),'reply':{'status':200,'body_json':{'status':'success','output':'','error':'rm: cannot remove','returncode':1}}},
   {'request':G('POST','/setup/execute',content_type=J,body_json={'command':'rm -f /home/user/.config/ChimeraX/ui-*','shell':True}),'reply':EXEC_OK},
   {'request':G('POST','/setup/launch',content_type=J,body_json={'command':cx_launch,'shell':False}),'reply':launched(' '.join(cx_launch))},
   {'request':cxrun('log clear'),'reply':cx()},
   {'request':cxrun('open 3ppd'),'reply':cx(['Opened 3ppd'])},
   {'request':cxrun('turn y 1'),'reply':cx()},
   {'request':cxrun('rainbow'),'reply':cx()},
   {'request':cxrun('color bypolymer'),'reply':cx()},
   {'request':cxrun('alphafold match A8Z1J3'),'reply':cx()}],
 'covers':['ChimeraX/execute','ChimeraX/launch','ChimeraX/clear_log','ChimeraX/open','ChimeraX/turn','ChimeraX/color','ChimeraX/alphafold_match']})
pairs.append({'name':'ChimeraX setup: download','phase':'initialize',
 'source':SB+'sci/base/init.py vm_download: the host fetches the URL, vmrun CopyFileFromHostToGuest copies it; no request to the guest servers. codapipe copies with the guest server\'s POST /setup/upload',
 'task':{'type':'ChimeraX','initialize':[{'func':'download','url':'{{URL}}/3ppd.cif','path':'/home/user/Downloads/prot.cif'}],'evaluate':[{'type':'stop','value':'DONE'}]},
 'exchanges':[{'request':G('POST','/setup/upload',content_type='multipart/form-data',body_json={'file_path':'/home/user/Downloads/prot.cif','file_data':'data_3PPD\n'}),'reply':{'status':200,'body':'File Uploaded'}}],
 'download':{'url':'/3ppd.cif','body':'data_3PPD\n'},
 'covers':['ChimeraX/download']})
states={'_state_containers.models._models.(1,)._name':'3ppd','_state_containers.models._models.(1,)._redraw_needed.cached_drawing_bounds.xyz_min':'[ -0.30499998  -5.4719996  -11.4869995 ]',
 '_state_containers.models._models.(1,).position':'[[ 1.  0.  0.  0. ] [ 0.  1.  0.  0. ] [ 0.  0.  1.  0. ]]','_state_containers.models._models.(1,)._display':True}
pairs.append({'name':'ChimeraX checks: states (literal, key lambda, find, pattern, null), info, file','phase':'evaluate','final':{'kind':'DONE'},
 'source':SB+'sci/ChimeraX/task.py _eval_states/_eval_info/_eval_file, chimerax.py VMManager.states_dump (states DIR STAMP, then GET :5000/read), sci/vm/vmanager.py read_file; ShiinaHiiragi/chimerax-states src/cmds.py',
 'task':{'type':'ChimeraX','initialize':[],'evaluate':[
   {'type':'states','key':'_state_containers.models._models.(1,)._redraw_needed.cached_drawing_bounds.xyz_min','value':'[ -0.30499998  -5.4719996  -11.4869995 ]'},
   {'type':'states','key':"lambda key: key.startswith('_state_containers.models._models.(1,)._nucleotide_info')",'value':None},
   {'type':'states','find':"lambda key, value: key.endswith('._name') and value == '3ppd'",'key':"lambda key: key.replace('._name', '._display')",'value':True},
   {'type':'states','key':'_state_containers.models._models.(1,).position','pattern':'^\\[\\[ +1\\. +0\\. +0\\. +0. +\\]'},
   {'type':'info','key':'sel','value':['1 atom selected']},
   {'type':'file','key':'/home/user/Downloads/out.txt','value':'hello'},
   {'type':'stop','value':'DONE'}]},
 'exchanges':[
   {'request':cxrun('states /home/user/Downloads {{STAMP}}'),'reply':cx()},
   {'request':G('GET','/read',query={'path':'/home/user/Downloads/{{STAMP}}.json'}),'reply':{'status':200,'body_json':states}},
   {'request':cxrun('info sel'),'reply':cx(['1 atom selected\n'])},
   {'request':G('GET','/read',query={'path':'/home/user/Downloads/out.txt'}),'reply':{'status':200,'body':'say hello\n'}}],
 'stage':[G('POST','/setup/launch',content_type=J,body_json={'command':cx_launch,'shell':False}),cxrun('open 3ppd'),cxrun('select /A')],
 'passed':True,'covers':['ChimeraX/states','ChimeraX/info','ChimeraX/file','ChimeraX/stop']})
# ---- GRASS
g=task('GrassGIS/A-02.json')
grass_launch='gnome-terminal -- /bin/bash -ic "FLASK_PORT=8000 grass --gui /home/user/grassdata/world_latlong_wgs84/PERMANENT"'
pairs.append({'name':'GrassGIS setup: execute, launch, map, layer, scale','phase':'initialize',
 'source':SB+'sci/GrassGIS/task.py _map/_layer/_scale, grass.py operate_map/operate_layer/operate_scale; ShiinaHiiragi/grass-gui wxgui.py Flask routes (text OK/ERROR)',
 'task':{'type':'GrassGIS','initialize':g['initialize']+[{'func':'scale','scale':25}],'evaluate':[{'type':'stop','value':'DONE'}]},
 'exchanges':[
   {'request':G('POST','/setup/execute',content_type=J,body_json={'command':'rm -rf /home/user/grassdata/*/*/.gislock','shell':True}),'reply':EXEC_OK},
   {'request':G('POST','/setup/launch',content_type=J,body_json={'command':grass_launch,'shell':True}),'reply':launched(grass_launch)},
   {'request':A('POST','/init/map',content_type=J,body_json={'grassdb':'/home/user/grassdata','location':'natural_earth_dataset','mapset':'PERMANENT'}),'reply':OK},
   {'request':A('POST','/init/layer',content_type=J,body_json={'query':{'name':'natural_earth'}}),'reply':OK},
   {'request':A('POST','/init/scale',content_type=J,body_json={'scale':25}),'reply':OK}],
 'covers':['GrassGIS/execute','GrassGIS/launch','GrassGIS/map','GrassGIS/layer','GrassGIS/scale']})
gdump={'layers':[{'name':'countries@PERMANENT','opacity':0.5,'hidden':False}],'windows':[],'toolbars':{'keys':[],'shown':True,'layer':None},'statusbar':{'mode':0,'scale':25.0},'region':{'n':90.0,'s':-90.0,'e':180.0,'w':-180.0},'output':''}
pairs.append({'name':'GrassGIS checks: info, db','phase':'evaluate','final':{'kind':'DONE'},
 'source':SB+'sci/GrassGIS/task.py TaskMixin.eval (one GET /dump up front), _eval_info, _eval_db; grass.py operate_gcmd',
 'task':{'type':'GrassGIS','initialize':[],'evaluate':g['evaluate']+[
   {'type':'db','cmd':'v.db.select','kwargs':{'map':'countries','format':'json'},'key':"lambda stdout: stdout['records']",'value':2,'pred':'lambda key, value: len(key) == value'},{'type':'stop','value':'DONE'}]},
 'exchanges':[
   {'request':A('GET','/dump'),'reply':{'status':200,'body_json':gdump}},
   {'request':A('POST','/gcmd',content_type=J,body_json={'cmd':'v.db.select','kwargs':{'map':'countries','format':'json'}}),'reply':{'status':200,'body_json':{'returncode':0,'stdout':{'records':[{'cat':1},{'cat':2}]}}}}],
 'stage':[G('POST','/setup/launch',content_type=J,body_json={'command':grass_launch,'shell':True}),
   A('POST','/init/map',content_type=J,body_json={'grassdb':'/home/user/grassdata','location':'natural_earth_dataset','mapset':'PERMANENT'}),
   A('POST','/init/layer',content_type=J,body_json={'query':{'name':'countries'}})],
 'passed':True,'covers':['GrassGIS/info','GrassGIS/db','GrassGIS/stop']})
# ---- Lean
l=task('Lean/A-05.json')
q=[it for it in l['initialize'] if it['func']=='query'][0]['expr']
header=q[:-6]
content='\n'.join(['','open Ordinal Cardinal','', 'def ℷ (κ : Cardinal) : Cardinal := κ ^ cof κ.ord','',header+'\n  sorry\n'])
pairs.append({'name':'Lean setup: import, open, def, query, launch','phase':'initialize',
 'source':SB+'sci/Lean/task.py VMTask._import/_open/_def/_query (buffered lines, one POST :5000/append), sci/vm/vtask.py _append',
 'task':{'type':'Lean','initialize':l['initialize'],'evaluate':l['evaluate']},
 'exchanges':[
   {'request':G('POST','/append',content_type=J,body_json={'path':'/home/user/sci/Sci/Basic.lean','content':content}),'reply':OK},
   {'request':G('POST','/setup/launch',content_type=J,body_json={'command':'code /home/user/sci /home/user/sci/Sci/Basic.lean','shell':True}),'reply':launched('code /home/user/sci /home/user/sci/Sci/Basic.lean')}],
 'covers':['Lean/import','Lean/open','Lean/def','Lean/query','Lean/launch']})
pairs.append({'name':'Lean check: placeholder','phase':'evaluate','final':{'kind':'DONE'},
 'source':SB+'sci/Lean/task.py VMTask.eval (POST :5000/lean/check header); vm_config/server.py lean_check',
 'task':{'type':'Lean','initialize':l['initialize'],'evaluate':l['evaluate']},
 'exchanges':[{'request':G('POST','/lean/check',content_type=J,body_json={'header':header}),'reply':{'status':200,'body_json':{'pass':True}}}],
 'passed':True,'covers':['Lean/placeholder']})
# ---- TeXstudio
tex=task('TeXstudio/B-04.json')
touches=[it for it in tex['initialize'] if it['func']=='touch']
main=touches[0]
pairs.append({'name':'TeXstudio setup: execute, touch, launch, opt, chimerax_*','phase':'initialize',
 'source':SB+'sci/TeXstudio/task.py VMTask._chimerax_open/_turn/_clear_log, texstudio.py VMManager._chimerax_execute; sci/base/init.py vm_touch',
 'task':{'type':'TeXstudio','initialize':[
   {'func':'execute','command':'rm -f /home/user/.config/ChimeraX/ui-*','shell':True},
   {'func':'touch','text':'\\documentclass{article}\n','path':'/home/user/atelier/main.tex'},
   {'func':'opt','depth':6},
   {'func':'launch','wait':2.5,'command':'texstudio /home/user/atelier/main.tex','shell':True},
   {'func':'launch','wait':7.5,'command':['chimerax','--cmd','remotecontrol rest start json true port «PORTLIKE»']},
   {'func':'chimerax_clear_log'},{'func':'chimerax_open','name':'2olx'},{'func':'chimerax_turn','axis':'y','angle':1}],'evaluate':[{'type':'stop','value':'DONE'}]},
 'exchanges':[
   {'request':G('POST','/setup/execute',content_type=J,body_json={'command':'rm -f /home/user/.config/ChimeraX/ui-*','shell':True}),'reply':EXEC_OK},
   {'request':G('POST','/write',content_type=J,body_json={'path':'/home/user/atelier/main.tex','content':'\\documentclass{article}\n'}),'reply':OK},
   {'request':G('POST','/opt',content_type=J,body_json={'depth':6}),'reply':OK},
   {'request':G('POST','/setup/launch',content_type=J,body_json={'command':'texstudio /home/user/atelier/main.tex','shell':True}),'reply':launched('texstudio /home/user/atelier/main.tex')},
   {'request':G('POST','/setup/launch',content_type=J,body_json={'command':cx_launch,'shell':False}),'reply':launched(' '.join(cx_launch))},
   {'request':cxrun('log clear'),'reply':cx()},{'request':cxrun('open 2olx'),'reply':cx()},{'request':cxrun('turn y 1'),'reply':cx()}],
 'covers':['TeXstudio/execute','TeXstudio/touch','TeXstudio/opt','TeXstudio/launch','TeXstudio/chimerax_clear_log','TeXstudio/chimerax_open','TeXstudio/chimerax_turn']})
bib=[it for it in tex['initialize'] if it['func']=='touch' and it['path'].endswith('.bib')]
pairs.append({'name':'TeXstudio checks: compile, file, include','phase':'evaluate','final':{'kind':'ANS','answer':'42'},
 'source':SB+'sci/TeXstudio/task.py VMTask._eval_compile (bibtex if a touch writes .bib), TaskMixin._eval_file/_eval_include; vm_config/server.py tex_check, read',
 'task':{'type':'TeXstudio','initialize':[{'func':'touch','text':'a \\cite{x} b \\cite{x}','path':'/home/user/atelier/main.tex'},{'func':'touch','text':'@article{x}','path':'/home/user/atelier/refs.bib'}],
   'evaluate':[{'type':'stop','value':'ANS','args':['42']},{'type':'compile','path':'/home/user/atelier','file':'main'},{'type':'file','path':'/home/user/atelier/main.tex','source':'\\cite{x}','target':'\\cite{y}'},{'type':'include','path':'/home/user/atelier/refs.bib','pattern':'@article\\{y'}]},
 'exchanges':[
   {'request':G('POST','/tex/check',content_type=J,body_json={'path':'/home/user/atelier','file':'main','bibtex':True}),'reply':{'status':200,'body_json':{'pass':True}}},
   {'request':G('GET','/read',query={'path':'/home/user/atelier/main.tex'}),'reply':{'status':200,'body':'a \\cite{y} b \\cite{y}'}},
   {'request':G('GET','/read',query={'path':'/home/user/atelier/refs.bib'}),'reply':{'status':200,'body':'@article{y,\n}'}}],
 'passed':True,'covers':['TeXstudio/compile','TeXstudio/file','TeXstudio/include','TeXstudio/stop']})
json.dump({'about':'see README.md','pairs':pairs},open(os.path.join(ROOT,'testdata/scienceboard/contract/golden.json'),'w'),indent=1,ensure_ascii=False)
print(len(pairs))
